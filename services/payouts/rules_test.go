package payouts

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

func bigPico(t *testing.T, s string) money.BigPico {
	t.Helper()
	var b money.BigPico
	if err := b.Scan(s); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCovers(t *testing.T) {
	t.Parallel()
	cent := money.PicoPerCent
	for _, c := range []struct {
		name              string
		balance, reserved string
		amount            money.Pico
		want              bool
	}{
		{"exactly the balance", "500000000000", "0", 50 * cent, true},
		{"one picodollar short", "499999999999", "0", 50 * cent, false},
		{"a picodollar over", "500000000001", "0", 50 * cent, true},
		{"the reserve takes the room", "1000000000000", "600000000000", 50 * cent, false},
		{"the reserve leaves exactly enough", "1100000000000", "600000000000", 50 * cent, true},
		{"a negative payable", "-1", "0", 1, false},
		{"a balance past int64", "92233720368547758080000", "92233720368547758070000", 10000, true},
		{"a reserve past int64", "92233720368547758070000", "92233720368547758080000", 1, false},
	} {
		if got := covers(bigPico(t, c.balance), bigPico(t, c.reserved), c.amount); got != c.want {
			t.Errorf("%s: covers(%s, %s, %d) = %v", c.name, c.balance, c.reserved, c.amount, got)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		doubt   bool
		mention string
	}{
		{"refused: account_invalid", &stripe.Error{HTTPStatusCode: 400, Code: stripe.ErrorCodeAccountInvalid, Msg: "No such account"},
			false, "Stripe refused the transfer (400): No such account (account_invalid). Nothing was paid."},
		{"refused: insufficient balance", &stripe.Error{HTTPStatusCode: 400, Code: stripe.ErrorCodeBalanceInsufficient, Msg: "Insufficient funds"},
			false, "(balance_insufficient)"},
		{"refused: rate limited", &stripe.Error{HTTPStatusCode: 429, Msg: "Too many requests"}, false, "(429)"},
		{"refused: bad key", &stripe.Error{HTTPStatusCode: 401, Msg: "Invalid API Key"}, false, "Nothing was paid"},
		{"key in use", &stripe.Error{HTTPStatusCode: 409, Code: stripe.ErrorCodeIdempotencyKeyInUse, Msg: "in use"}, true, "may have been made"},
		{"Stripe's own error", &stripe.Error{HTTPStatusCode: 500, Msg: "oops"}, true, "(500)"},
		{"no answer", fmt.Errorf("stripe: create transfer: %w", errors.New("read: connection reset by peer")), true, "No answer from Stripe"},
		{"a Stripe error without a status", &stripe.Error{Msg: "?"}, true, "No answer"},
	} {
		doubt, reason := outcomeOf(c.err)
		if doubt != c.doubt || !strings.Contains(reason, c.mention) {
			t.Errorf("%s: outcomeOf = %v, %q; want %v, mentioning %q", c.name, doubt, reason, c.doubt, c.mention)
		}
	}
	_, long := outcomeOf(errors.New(strings.Repeat("ü", 2000)))
	if len(long) > 1000 || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("a long reason is kept as %d bytes, valid %v", len(long), utf8.ValidString(long))
	}
}

func TestReadStatement(t *testing.T) {
	t.Parallel()
	provider := "0b7b8f6e-2a53-4d4e-9f0e-4a1f3c2b1a00"
	ok := statement{id: "st_2026-03_0001", provider: provider, period: "2026-03", number: " GPM-S-2026-000001 ", cents: 1000}
	in, err := readStatement(ok)
	if err != nil || in.Number != "GPM-S-2026-000001" || in.AmountCents != 1000 || in.ID != ok.id {
		t.Fatalf("readStatement(ok) = %+v, %v", in, err)
	}
	for _, c := range []struct {
		field string
		edit  func(*statement)
	}{
		{"amount_cents", func(s *statement) { s.cents = 0 }},
		{"amount_cents", func(s *statement) { s.cents = math.MinInt64 }},
		{"amount_cents", func(s *statement) { s.cents = MaxPayoutCents + 1 }},
		{"statement_id", func(s *statement) { s.id = "" }},
		{"statement_id", func(s *statement) { s.id = strings.Repeat("a", 101) }},
		{"statement_id", func(s *statement) { s.id = "st 1" }},
		{"provider_account_id", func(s *statement) { s.provider = strings.ToUpper(provider) }},
		{"period", func(s *statement) { s.period = "2026-3" }},
		{"period", func(s *statement) { s.period = "2026-00" }},
		{"number", func(s *statement) { s.number = "" }},
		{"number", func(s *statement) { s.number = strings.Repeat("№", 65) }},
	} {
		s := ok
		c.edit(&s)
		_, err := readStatement(s)
		var ae *services.Error
		if !errors.As(err, &ae) || ae.Code != services.CodeInvalid || ae.Fields[c.field] == "" {
			t.Errorf("readStatement(%+v) = %v; want invalid %s", s, err, c.field)
		}
	}
	if _, err := readStatement(nil); services.ErrorCode(err) != services.CodeInvalid {
		t.Errorf("readStatement(nil) = %v", err)
	}
	if got := MaxPayoutCents * int64(money.PicoPerCent); got/int64(money.PicoPerCent) != MaxPayoutCents || got < 0 {
		t.Errorf("the largest payout overflows a posting: %d", got)
	}
}

func TestCentsText(t *testing.T) {
	t.Parallel()
	for cents, want := range map[int64]string{0: "$0.00", 5: "$0.05", 1234: "$12.34", -5: "-$0.05", -100000: "-$1,000.00",
		math.MinInt64: "-$92,233,720,368,547,758.08", math.MaxInt64: "$92,233,720,368,547,758.07"} {
		if got := centsText(cents); got != want {
			t.Errorf("centsText(%d) = %q, want %q", cents, got, want)
		}
	}
}

func TestActionsOf(t *testing.T) {
	t.Parallel()
	started := testNow.Add(-time.Minute)
	stale := testNow.Add(-AttemptLease)
	for _, c := range []struct {
		name string
		p    Payout
		want []string
	}{
		{"failed", Payout{Status: StatusFailed}, []string{ActionRetry}},
		{"under way", Payout{Status: StatusPending, AttemptStartedAt: &started}, []string{}},
		{"pending past its lease", Payout{Status: StatusPending, AttemptStartedAt: &stale}, []string{ActionRetry}},
		{"paid", Payout{Status: StatusPaid}, []string{}},
	} {
		if got := actionsOf(c.p, testNow); !slices.Equal(got, c.want) {
			t.Errorf("%s: actions %v, want %v", c.name, got, c.want)
		}
	}
}

func TestConnectInputValidate(t *testing.T) {
	t.Parallel()
	ok := ConnectInput{ProviderAccountID: "0b7b8f6e-2a53-4d4e-9f0e-4a1f3c2b1a00", Email: "ops@fjord.test", Country: "DE",
		RefreshURL: "http://localhost:8080/provider/payouts/onboarding", ReturnURL: "https://gpumarket.example/provider/payouts/return"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field string
		edit  func(*ConnectInput)
	}{
		{"country", func(in *ConnectInput) { in.Country = "de" }},
		{"country", func(in *ConnectInput) { in.Country = "DEU" }},
		{"email", func(in *ConnectInput) { in.Email = "nobody" }},
		{"refresh_url", func(in *ConnectInput) { in.RefreshURL = "/provider/payouts/onboarding" }},
		{"return_url", func(in *ConnectInput) { in.ReturnURL = "javascript:alert(1)" }},
		{"provider_account_id", func(in *ConnectInput) { in.ProviderAccountID = "x" }},
	} {
		in := ok
		c.edit(&in)
		var ae *services.Error
		if err := in.Validate(); !errors.As(err, &ae) || ae.Fields[c.field] == "" {
			t.Errorf("Validate(%+v) = %v; want %s refused", in, err, c.field)
		}
	}
}
