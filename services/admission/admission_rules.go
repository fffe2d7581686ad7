package admission

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
	// RelayedBytes and RelayedChunks are the output the gateway relayed of the answer
	// (GatewayRequest's fields of the same names).
	RelayedBytes, RelayedChunks int64
}

// Settlement is what Reservation.Settle is given for an ended request: the request id it may
// be billed under, whether the meter may bill it anything, and what the gateway relayed of its
// answer, which bounds the output the meter may bill (ticket.BillableOf).
type Settlement struct {
	RequestID string
	Billable  bool
	// Relayed says the answer was relayed, in RelayedBytes and RelayedChunks.
	Relayed                     bool
	RelayedBytes, RelayedChunks int64
}

// SettlementOf is the settlement of a request that ended so. The usage the rig's answer
// claimed plays no part: the meter bills what the rig's usage event reports later, within the
// ticket's bounds, so that is what stays held.
//   - No attempt reached a rig: no request id, so nothing is held and nothing can be billed.
//   - The client went away before the rig answered, or the rig refused the request (any
//     status but 2xx): the gateway's record says the attempt failed, and the meter bills
//     nothing of it (docs/failure-cases.md, case 18), so nothing is held.
//   - The rig answered: its ticket's bound, the output no more than the relayed output holds.
func SettlementOf(e Ending) Settlement {
	switch {
	case e.RequestID == "":
		return Settlement{}
	case !e.Answered || e.HTTPStatus < 200 || e.HTTPStatus >= 300:
		return Settlement{RequestID: e.RequestID}
	}
	return Settlement{RequestID: e.RequestID, Billable: true, Relayed: true, RelayedBytes: e.RelayedBytes, RelayedChunks: e.RelayedChunks}
}
