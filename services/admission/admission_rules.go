package admission

import (
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// The rules admission decides by, apart from the figures it keeps (see Admission): whether an
// account's standing admits a request, and what an ended request's reservation turns into.

// Standing is what an account, one of its API keys and the person who created the key have to
// spend when a request asks to start: the account's credit balance, what it has committed that
// the balance does not show yet (held: ended, not yet metered; in flight: reserved), and the
// same of the key, of the person's keys and of the whole account against their limits in their
// periods at Now.
type Standing struct {
	Balance, Held, InFlight money.Pico
	// Key is the key's limit; Member the limit on the keys its creator made in the account;
	// Account the account's monthly budget.
	Key, Member, Account Allowance
	Now                  time.Time
}

// Allowance is one limit and what was spent and committed against it in its current period.
type Allowance struct {
	Spent, Held, InFlight money.Pico
	Limit                 *money.Pico // nil for none
	Period                periods.Period
}

// reached reports whether the spend and commitments are at or past the limit.
func (a Allowance) reached() bool {
	return a.Limit != nil && a.Spent+a.Held+a.InFlight >= *a.Limit
}

// Refusal is why a standing refuses a request, nil when it admits it: ErrCreditSpent when the
// balance less the commitments is <= 0; ErrKeyLimitReached, ErrMemberLimitReached or
// ErrAccountBudgetReached when that limit's spend in its period plus its commitments is >= the
// limit. It is asked before the request's own reservation is taken, so a few cents left still
// admit a small request. Each message names the limit and when it resets.
func Refusal(s Standing) error {
	if s.Balance-s.Held-s.InFlight <= 0 {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrCreditSpent,
			Message: "Your credit balance is spent. Buy credits on the Credits page, then retry."}
	}
	if s.Key.reached() {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrKeyLimitReached,
			Message: fmt.Sprintf("This API key has reached its %s spending limit of %s; it resets %s. Raise the limit on the API keys page, or wait until then.",
				s.Key.Period.Adjective(), s.Key.Limit.String(), resetText(s.Key.Period, s.Now))}
	}
	if s.Member.reached() {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrMemberLimitReached,
			Message: fmt.Sprintf("The keys you created in this account have reached your %s spending limit of %s; it resets %s. An account admin can raise it on the Budgets page.",
				s.Member.Period.Adjective(), s.Member.Limit.String(), resetText(s.Member.Period, s.Now))}
	}
	if s.Account.reached() {
		return &services.Error{Code: services.CodeForbidden, Cause: ErrAccountBudgetReached,
			Message: fmt.Sprintf("This account has reached its monthly budget of %s; it resets %s. An account admin can raise it on the Budgets page.",
				s.Account.Limit.String(), resetText(periods.Month, s.Now))}
	}
	return nil
}

// resetText says when the period holding now ends: "at 00:00 UTC on Monday 16 March 2026".
func resetText(p periods.Period, now time.Time) string {
	return p.End(now).Format("at 15:04 UTC on Monday 2 January 2006")
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
