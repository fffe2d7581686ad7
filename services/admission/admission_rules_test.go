package admission

import (
	"errors"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
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
		{"under the key's limit", Standing{Balance: dollar, KeySpent: 2 * dollar, KeyLimit: limit(3 * dollar)}, nil},
		{"at the key's limit", Standing{Balance: dollar, KeySpent: 3 * dollar, KeyLimit: limit(3 * dollar)}, ErrKeyLimitReached},
		{"the key's commitments count", Standing{Balance: dollar, KeySpent: dollar, KeyHeld: dollar, KeyInFlight: dollar,
			KeyLimit: limit(3 * dollar)}, ErrKeyLimitReached},
		{"no limit: the key's spend does not count", Standing{Balance: dollar, KeySpent: 100 * dollar}, nil},
		{"spent credit before the key's limit", Standing{KeySpent: 3 * dollar, KeyLimit: limit(dollar)}, ErrCreditSpent},
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
