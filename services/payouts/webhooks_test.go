package payouts

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gpumarket/gpumarket/services/webhooks/webhookstest"
)

// A payout paid is sent to its provider's webhooks once, from the transaction that records it
// paid, with the amount the statement paid; paying it again sends nothing.
func TestPayoutPaidIsSentToTheProvidersWebhooks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	hooks := webhookstest.New(t, e.pool)
	svc := NewService(Config{Pool: e.pool, Ledger: e.ledger, Stripe: e.stripe.client, Statements: e.statements,
		Events: hooks.Service, Now: e.clock.Now})
	hooks.Subscribe(t, e.provider)
	hooks.Subscribe(t, e.customer)
	e.onboard(t)
	e.earn(t, usd("73.456789123456"), "usage-1")
	st := e.march("st-0001", 6137)
	p, err := svc.Pay(ctx, st)
	if err != nil || p.Status != StatusPaid {
		t.Fatalf("pay: %+v, %v", p, err)
	}
	if _, err := svc.Pay(ctx, st); err != nil {
		t.Fatal(err)
	}
	got := hooks.Events(t)
	if len(got) != 1 || got[0].Type != EventPayoutPaid {
		t.Fatalf("events %+v: want one payout.paid, to the provider only", got)
	}
	var data PayoutPaid
	if err := json.Unmarshal(got[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.PayoutID != p.ID || data.StatementID != "st-0001" || data.StatementNumber != "GPM-S-2026-st-0001" ||
		data.Period != "2026-03" || data.AmountCents != 6137 || data.AmountUSD != "61.37" || data.Currency != "usd" ||
		data.StripeTransferID != p.StripeTransferID || !data.PaidAt.Equal(testNow) {
		t.Fatalf("data %+v: want the payout of $61.37 for st-0001", data)
	}
}
