package credits

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/money"
)

// Every adjustment is in the finance audit log with who made it, the account, the reason and
// the balance before and after; one that is refused records nothing.
func TestAdjustmentsAreRecordedInTheAuditLog(t *testing.T) {
	s := setupShop(t, nil)
	ctx := context.Background()
	log := audit.New(s.pool, s.clock.Now)
	s.credits.RecordTo(log)
	finance := newUser(t, s.pool, newOrg(t, s.pool, "gpumarket"), "finance@gpumarket.test")

	if _, err := s.credits.Adjust(ctx, AdjustInput{AccountID: s.org, Amount: cents(2500), Reason: "Outage on 3 March", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.credits.Adjust(ctx, AdjustInput{AccountID: s.org, Amount: cents(-500), Reason: "Chargeback", ByUserID: finance}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.credits.Adjust(ctx, AdjustInput{AccountID: s.org, Amount: cents(100), ByUserID: finance}); err == nil {
		t.Fatal("an adjustment without a reason was made")
	}
	page, err := log.List(ctx, audit.Filter{Action: audit.ActionAdjustment})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 {
		t.Fatalf("%d adjustments in the audit log, want 2: %+v", len(page.Entries), page.Entries)
	}
	type state struct {
		Balance money.BigPico `json:"balance_pico"`
		Amount  money.Pico    `json:"amount_pico"`
		Reason  string        `json:"reason"`
	}
	for i, c := range []struct {
		summary       string
		before, after money.Pico
	}{
		{"Took back $5.00 of credit: Chargeback", cents(2500), cents(2000)},
		{"Granted $25.00 of credit: Outage on 3 March", 0, cents(2500)},
	} {
		e := page.Entries[i]
		var before, after state
		if json.Unmarshal(e.Before, &before) != nil || json.Unmarshal(e.After, &after) != nil {
			t.Fatalf("entry %d: %s / %s", i, e.Before, e.After)
		}
		if e.Summary != c.summary || e.ActorID != finance || e.Actor != "finance@gpumarket.test" || e.SubjectID != s.org ||
			!before.Balance.Equal(c.before) || !after.Balance.Equal(c.after) || after.Amount != c.after-c.before {
			t.Errorf("entry %d: %q by %s, before %s after %s (%s); want %q, %s -> %s", i, e.Summary, e.Actor,
				before.Balance, after.Balance, after.Amount, c.summary, money.BigPicoOf(c.before), money.BigPicoOf(c.after))
		}
	}
}
