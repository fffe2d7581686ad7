package metering

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/usage"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is one delivery from the stream: its sequence, subject and body, and when the
// stream stored it.
type Message struct {
	Seq     uint64
	Subject string
	Data    []byte
	// Stored is the stream's timestamp of the message: how long an event has waited for the
	// gateway's record is measured from it. Zero is taken for the metering time.
	Stored time.Time
}

// BatchResult says what a committed batch did.
type BatchResult struct {
	Stored  int
	Charged money.BigPico
	// Rejections are the batch's refused events; Samples those of them kept whole (the first
	// few of their rig and reason in the hour).
	Rejections []StoredRejection
	Samples    []StoredRejection
	// Deferred are the events left to wait for the gateway's record of their attempt: not
	// stored, not refused, delivered again after their delay.
	Deferred []Deferral
	// Occurred holds the event times of the Stored events, in no particular order.
	Occurred []time.Time
	// Usages holds the Stored events' data, with the tokens billed, each at the index of its
	// time in Occurred.
	Usages []usage.Usage
}

// Deferral is an event put off until the gateway's record of its attempt may have landed.
type Deferral struct {
	Message
	EventID string
	Delay   time.Duration
}

// StoredRejection is a refused event as the rejections table keeps it.
type StoredRejection struct {
	Message
	EventID string
	Reason  usage.RejectReason
	Detail  string
}

// Process meters a batch of messages in one database transaction and returns what it did. It
// is safe to run again on the same messages: what is stored stays stored once. Deferred
// events are left to the caller.
func (m *Meter) Process(ctx context.Context, batch []jetstream.Msg) (BatchResult, error) {
	return m.commit(ctx, m.checkBatch(batch))
}

// ProcessMessages is Process on messages already read off the stream.
func (m *Meter) ProcessMessages(ctx context.Context, msgs []Message) (BatchResult, error) {
	return m.commit(ctx, m.check(msgs))
}
