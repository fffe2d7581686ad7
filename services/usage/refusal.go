package usage

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
)

// RefusalReason says why the usage stream refused an event.
type RefusalReason string

const (
	// RefusedRigPending: the rig has as many events waiting to be metered as the stream holds for one rig
	// (StreamOptions.MaxPendingPerRig). Its other events wait in its outbox until the meter has caught up.
	RefusedRigPending RefusalReason = "rig_pending_limit"
	// RefusedStreamFull: the stream holds as much as it may, all rigs together (StreamOptions.MaxBytes).
	RefusedStreamFull RefusalReason = "stream_full"
	// RefusedTooLarge: the event is larger than MaxEventBytes.
	RefusedTooLarge RefusalReason = "too_large"
)

// errCodeStoreFailed is nats-server's error code for a message the stream would not store; its description says
// which limit refused it.
const errCodeStoreFailed jetstream.ErrorCode = 10077

// RefusedError is the usage stream's refusal of an event published on Subject, the subject of the rig that sent
// it. It names the rig: an operator reading a rig's log, or the platform's, sees whose events were refused.
type RefusedError struct {
	Subject string
	Reason  RefusalReason
	Err     error // the server's answer
}

func (e *RefusedError) Error() string {
	var why string
	switch e.Reason {
	case RefusedRigPending:
		why = "this rig has as many events waiting to be metered as the stream holds for one rig"
	case RefusedStreamFull:
		why = "the stream is full"
	case RefusedTooLarge:
		why = fmt.Sprintf("the event is larger than %d bytes", MaxEventBytes)
	}
	return fmt.Sprintf("usage: stream %s refused an event on %s: %s (%v)", events.UsageStream, e.Subject, why, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Refused reads an error from publishing on subject: a *RefusedError when the stream refused the event, nil for
// any other error (the connection, a timeout: nothing was refused) and for none.
func Refused(subject string, err error) *RefusedError {
	var api *jetstream.APIError
	if err == nil || !errors.As(err, &api) {
		return nil
	}
	reason := refusalReason(api)
	if reason == "" {
		return nil
	}
	return &RefusedError{Subject: subject, Reason: reason, Err: err}
}

func refusalReason(api *jetstream.APIError) RefusalReason {
	switch {
	case api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		return RefusedTooLarge
	case api.ErrorCode != errCodeStoreFailed:
		return ""
	case strings.Contains(api.Description, "per subject"):
		return RefusedRigPending
	case strings.Contains(api.Description, "maximum bytes"), strings.Contains(api.Description, "maximum messages"):
		return RefusedStreamFull
	case strings.Contains(api.Description, "too large"):
		return RefusedTooLarge
	}
	return ""
}
