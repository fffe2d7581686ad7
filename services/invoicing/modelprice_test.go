package invoicing

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
)

// TestAnInvoiceLineNamesTheModelsOwnPrice: usage sold at the model's own standard price ($0.40 in, $0.80 out per
// million tokens) is a line of its own, at that price, which its description calls the model's own; usage of
// the same model sold at the tier's default is another line. The document foots to the cent.
func TestAnInvoiceLineNamesTheModelsOwnPrice(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	own := fixtures.Price(w.t, w.pool, "standard", time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC), 400000, 800000,
		fixtures.ForModel("llama-3.1-8b"))
	w.buy(acme, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 500)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC), in: 1_000_000, out: 1_000_000})
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), in: 2_000_000, out: 1_000_000, priceID: own})
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)
	if len(inv.Lines) != 2 {
		t.Fatalf("%d lines, want the default's and the model's own: %+v", len(inv.Lines), inv.Lines)
	}
	def, mod := inv.Lines[0], inv.Lines[1]
	if def.ModelPrice || def.PriceID != w.price || def.Amount != 45 || !strings.Contains(def.Description, "(prices from 1 Jan 2026)") {
		t.Errorf("the default's line %+v", def)
	}
	// 2,000,000 x $0.40/M + 1,000,000 x $0.80/M = $1.60.
	if !mod.ModelPrice || mod.PriceID != own || *mod.InputPrice != 400_000 || *mod.OutputPrice != 800_000 || mod.Amount != 160 ||
		!strings.Contains(mod.Description, "Standard tier · llama-3.1-8b · $0.40 input, $0.80 output per million tokens (the model's own prices from 5 Mar 2026)") {
		t.Errorf("the model's line %+v: %s", mod, mod.Description)
	}
	d, err := InvoiceDocument(inv)
	if err != nil {
		t.Fatal(err)
	}
	if d.Lines[1].Description != mod.Description || d.Lines[1].Tokens.InputPrice != 400_000 {
		t.Errorf("document line %+v", d.Lines[1])
	}
}
