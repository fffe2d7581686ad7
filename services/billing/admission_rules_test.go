package billing

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

func TestSettlementOf(t *testing.T) {
	usage := &TokenCount{Input: 10, Output: 20}
	for _, c := range []struct {
		name   string
		e      Ending
		wantID string
		want   *TokenCount // nil: the whole reservation
	}{
		{"no attempt reached a rig: nothing held or billed", Ending{}, "", nil},
		{"no attempt, whatever else is said", Ending{Answered: true, HTTPStatus: 200, Usage: usage}, "", nil},
		{"the client left before the answer: the reservation held", Ending{RequestID: "req_1"}, "req_1", nil},
		{"answered with usage", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 200, Usage: usage}, "req_1", usage},
		{"answered without usage: the reservation held", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 201},
			"req_1", nil},
		{"refused by the rig: nothing", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 400, Usage: usage},
			"req_1", &TokenCount{}},
		{"a 404: nothing", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 404}, "req_1", &TokenCount{}},
		{"a 1xx is no answer to bill", Ending{RequestID: "req_1", Answered: true, HTTPStatus: 101}, "req_1", &TokenCount{}},
	} {
		id, used := SettlementOf(c.e)
		if id != c.wantID {
			t.Errorf("%s: request id %q; want %q", c.name, id, c.wantID)
		}
		switch {
		case (used == nil) != (c.want == nil):
			t.Errorf("%s: used %v; want %v", c.name, used, c.want)
		case used != nil && *used != *c.want:
			t.Errorf("%s: used %+v; want %+v", c.name, *used, *c.want)
		}
	}
}
