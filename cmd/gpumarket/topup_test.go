package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// With test payments, the web role runs auto top-up's worker on stripe-mock: a developer whose
// balance is below the threshold is charged once and credited exactly the amount, through the
// platform's own webhook, and not charged again once above.
func TestAutoTopupRunsWithTestPayments(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, Roles{Web: true})
	cfg.TopupEvery = 50 * time.Millisecond
	p := runPlatform(t, cfg)
	ctx := context.Background()
	dev, err := p.accounts.SignUp(ctx, accounts.SignUpInput{Email: "topup@example.com", Password: "topup-password-1",
		Role: accounts.RoleDeveloper, AccountName: "Topup Labs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.topups.StartSaveCard(ctx, credits.SaveCardInput{AccountID: dev.AccountID, ReturnURL: p.URL() + "/credits",
		CancelURL: p.URL() + "/credits", RandomPart: "1"}); err != nil {
		t.Fatal(err)
	}
	customer, err := p.topups.Customer(ctx, dev.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	saved := credits.SetupSucceededEvent("evt_cmd_setup", dev.AccountID, customer, "pm_card_visa", now)
	req, _ := http.NewRequest(http.MethodPost, p.URL()+"/webhooks/stripe", bytes.NewReader(saved))
	req.Header.Set("Stripe-Signature", credits.SignEvent(saved, cfg.StripeWebhookSecrets[0], now))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("setup_intent.succeeded: %d", res.StatusCode)
	}
	if _, err := p.topups.Save(ctx, credits.SettingsInput{AccountID: dev.AccountID, Email: dev.Email, Enabled: true,
		ThresholdCents: 1000, AmountCents: 2000}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		att, err := p.topups.Attempts(ctx, dev.AccountID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(att) == 1 && att[0].Status == credits.AttemptSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no top-up credited within 20 s: %+v", att)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // rounds after the credit charge nothing more
	if att, _ := p.topups.Attempts(ctx, dev.AccountID, 10); len(att) != 1 {
		t.Fatalf("%d top-ups, want 1: %+v", len(att), att)
	}
	l := ledger.NewLedger(p.pool, nil)
	id, err := l.AccountFor(ctx, ledger.AccountCustomerCredit, dev.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := l.Balance(ctx, id); err != nil || !b.Equal(2000*money.PicoPerCent) {
		t.Fatalf("balance %s, %v; want $20.00", b, err)
	}
}
