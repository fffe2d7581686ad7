package invoicing

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/webhooks/webhookstest"
)

// An invoice issued is sent to its customer's webhooks once, with its number and amounts, from
// the transaction that issues it; a draft closed is not an event.
func TestInvoiceIssuedIsSentToTheCustomersWebhooks(t *testing.T) {
	var hooks *webhookstest.Receiver
	w := newWorld(t, func(c *Config) {
		hooks = webhookstest.New(t, c.Pool)
		c.Events = hooks.Service
	})
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	hooks.Subscribe(t, acme)
	w.buy(acme, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 500)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), in: 1_000_000, out: 1_000_000}) // $0.45
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	if got := hooks.Events(t); len(got) != 0 {
		t.Fatalf("a closed draft sent %d events", len(got))
	}
	inv := w.invoiceOf(acme, march)
	approved := w.approve(inv.ID)[0]
	if res, _ := w.svc.ApproveInvoices(w.ctx(), w.finance, []string{inv.ID}); res[0].Err == nil {
		t.Fatal("an issued invoice was approved again")
	}
	got := hooks.Events(t)
	if len(got) != 1 || got[0].Type != EventInvoiceIssued {
		t.Fatalf("events %+v: want one invoice.issued", got)
	}
	var data InvoiceIssued
	if err := json.Unmarshal(got[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	// $0.45 used against $5 of credit bought: nothing is due.
	if data.InvoiceID != inv.ID || data.Number != approved.Number || data.Period != "2026-03" || data.TotalCents != 45 ||
		data.TotalUSD != "0.45" || data.AmountDueCents != 0 || data.AmountDueUSD != "0.00" || data.Currency != "usd" {
		t.Fatalf("data %+v: want the invoice's number, period and $0.45", data)
	}
}
