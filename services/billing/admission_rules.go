package billing

import (
	"fmt"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// The rules admission decides by, apart from the figures it keeps (see Admission): whether an
// account's standing admits a request, and what an ended request's reservation turns into.

// Standing is what an account and one of its API keys have to spend when a request asks to
// start: the account's credit balance, what it has committed that the balance does not show
// yet (held: ended, not yet metered; in flight: reserved), and the same of the key this month
// against its limit.
type Standing struct {
	Balance, Held, InFlight        money.Pico
	KeySpent, KeyHeld, KeyInFlight money.Pico
	// KeyLimit is the key's monthly limit; nil for none.
	KeyLimit *money.Pico
}

// Refusal is why a standing refuses a request, nil when it admits it: ErrCreditSpent when the
// balance less the commitments is <= 0; ErrKeyLimitReached when the key's spend this month
// plus its commitments is >= its limit. It is asked before the request's own reservation is
// taken, so a few cents left still admit a small request.
func Refusal(s Standing) error {
	if s.Balance-s.Held-s.InFlight <= 0 {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrCreditSpent,
			Message: "Your credit balance is spent. Buy credits on the Credits page, then retry."}
	}
	if s.KeyLimit != nil && s.KeySpent+s.KeyHeld+s.KeyInFlight >= *s.KeyLimit {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrKeyLimitReached,
			Message: fmt.Sprintf("This API key has reached its monthly spending limit of %s. Raise the limit on the API keys page, or wait for next month.", s.KeyLimit.String())}
	}
	return nil
}

// Ending is how the last attempt at a gateway request ended, as the gateway saw it.
type Ending struct {
	// RequestID is the attempt's request id; "" when no attempt reached a rig.
	RequestID string
	// Answered says the rig answered, with HTTPStatus; false when the client went away first.
	Answered   bool
	HTTPStatus int
	// Usage is what the answer reported; nil when none came by.
	Usage *TokenCount
}

// SettlementOf is what Reservation.Settle is given for a request that ended so: the request id
// it may be billed under and the usage to hold as its cost (nil: its whole reservation).
//   - No attempt reached a rig: no request id, so nothing is held and nothing can be billed.
//   - The client went away before the rig answered: the rig may still report the attempt, so
//     its reservation is held under its id until the meter's row shows (docs/failure-cases.md,
//     case 18).
//   - The rig refused the request (any status but 2xx): nothing was produced, nothing is held.
//   - The rig answered: the usage it reported, or the reservation when it reported none.
func SettlementOf(e Ending) (requestID string, used *TokenCount) {
	switch {
	case e.RequestID == "":
		return "", nil
	case !e.Answered:
		return e.RequestID, nil
	case e.HTTPStatus < 200 || e.HTTPStatus >= 300:
		return e.RequestID, &TokenCount{}
	}
	return e.RequestID, e.Usage
}
