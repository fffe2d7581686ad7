package admission

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

func TestRefusal(t *testing.T) {
	limit := func(p money.Pico) *money.Pico { return &p }
	const dollar = money.Pico(1_000_000_000_000)
	for _, c := range []struct {
		name string
		s    Standing
		want error // nil: admitted
	}{
		{"credit left", Standing{Balance: dollar}, nil},
		{"a cent left admits a request of any size", Standing{Balance: dollar, InFlight: dollar - dollar/100}, nil},
		{"nothing left", Standing{Balance: dollar, Held: dollar / 2, InFlight: dollar / 2}, ErrCreditSpent},
		{"no balance", Standing{}, ErrCreditSpent},
		{"overdrawn", Standing{Balance: -dollar}, ErrCreditSpent},
		{"under the key's limit", Standing{Balance: dollar, Key: Allowance{Spent: 2 * dollar, Limit: limit(3 * dollar)}}, nil},
		{"at the key's limit", Standing{Balance: dollar, Key: Allowance{Spent: 3 * dollar, Limit: limit(3 * dollar)}}, ErrKeyLimitReached},
		{"the key's commitments count", Standing{Balance: dollar, Key: Allowance{Spent: dollar, Held: dollar, InFlight: dollar,
			Limit: limit(3 * dollar)}}, ErrKeyLimitReached},
		{"no limit: the key's spend does not count", Standing{Balance: dollar, Key: Allowance{Spent: 100 * dollar}}, nil},
		{"at the member's limit", Standing{Balance: dollar, Member: Allowance{Spent: dollar, Held: dollar, Limit: limit(2 * dollar)}},
			ErrMemberLimitReached},
		{"under the member's limit", Standing{Balance: dollar, Member: Allowance{Spent: dollar, Limit: limit(2 * dollar)}}, nil},
		{"at the account's budget", Standing{Balance: dollar, Account: Allowance{Spent: dollar, InFlight: dollar, Limit: limit(2 * dollar)}},
			ErrAccountBudgetReached},
		{"the key's limit is named before the account's budget", Standing{Balance: dollar,
			Key: Allowance{Spent: dollar, Limit: limit(dollar)}, Account: Allowance{Spent: dollar, Limit: limit(dollar)}}, ErrKeyLimitReached},
		{"spent credit before the key's limit", Standing{Key: Allowance{Spent: 3 * dollar, Limit: limit(dollar)}}, ErrCreditSpent},
	} {
		err := Refusal(c.s)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: refused with %v; want admitted", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		case c.want != nil && services.ErrorCode(err) != services.CodeForbidden:
			t.Errorf("%s: code %q; want forbidden", c.name, services.ErrorCode(err))
		}
	}
}

// What an ended request leaves held never rests on the usage its answer claims: an answer
// leaves its ticket's bound held, lowered to what the gateway relayed; an attempt the gateway
// saw fail leaves nothing, as the meter bills nothing of it.
// A refusal names the limit and when it resets: the next 00:00 UTC, the next Monday, the first of
// the next month.
func TestRefusalSaysWhenTheLimitResets(t *testing.T) {
	limit := money.Pico(money.PicoPerUSD)
	now := time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC) // a Saturday
	for _, c := range []struct {
		s    Standing
		want string
	}{
		{Standing{Key: Allowance{Spent: limit, Limit: &limit, Period: periods.Day}},
			"daily spending limit of $1.00; it resets at 00:00 UTC on Sunday 15 March 2026"},
		{Standing{Key: Allowance{Spent: limit, Limit: &limit, Period: periods.Week}},
			"weekly spending limit of $1.00; it resets at 00:00 UTC on Monday 16 March 2026"},
		{Standing{Member: Allowance{Spent: limit, Limit: &limit, Period: periods.Month}},
			"your monthly spending limit of $1.00; it resets at 00:00 UTC on Wednesday 1 April 2026"},
		{Standing{Account: Allowance{Spent: limit, Limit: &limit, Period: periods.Month}},
			"monthly budget of $1.00; it resets at 00:00 UTC on Wednesday 1 April 2026"},
	} {
		c.s.Balance, c.s.Now = limit, now
		var e *services.Error
		if err := Refusal(c.s); !errors.As(err, &e) || !strings.Contains(e.Message, c.want) {
			t.Errorf("refusal %v; want a message with %q", err, c.want)
		}
	}
}

func TestSettlementOf(t *testing.T) {
	for _, c := range []struct {
		name string
		e    Ending
		want Settlement
	}{
		{"no attempt reached a rig: nothing held or billed", Ending{}, Settlement{}},
		{"no attempt, whatever else is said", Ending{Answered: true, HTTPStatus: 200, RelayedBytes: 60_000}, Settlement{}},
		{"the client left before the answer: the meter bills nothing", Ending{RequestID: "req_1"}, Settlement{RequestID: "req_1"}},
		{"answered: the bound on what was relayed",
			Ending{RequestID: "req_1", Answered: true, HTTPStatus: 200, RelayedBytes: 60_000, RelayedChunks: 1},
			Settlement{RequestID: "req_1", Billable: true, Relayed: true, RelayedBytes: 60_000, RelayedChunks: 1}},
		{"answered with nothing relayed", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 201},
			Settlement{RequestID: "req_1", Billable: true, Relayed: true}},
		{"refused by the rig: nothing", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 400, RelayedBytes: 80},
			Settlement{RequestID: "req_1"}},
		{"a 404: nothing", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 404}, Settlement{RequestID: "req_1"}},
		{"a 1xx is no answer to bill", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 101}, Settlement{RequestID: "req_1"}},
	} {
		if got := SettlementOf(c.e); got != c.want {
			t.Errorf("%s: SettlementOf = %+v; want %+v", c.name, got, c.want)
		}
	}
}
