package invoicing

import (
	"testing"
	"time"
)

// SumDocuments sums what a close wrote: the invoices' lines, the statements' payables and the flags.
func TestSumDocuments(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 3)
	w.at(time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC))
	w.close(march)

	s, err := SumDocuments(w.ctx(), w.pool)
	if err != nil {
		t.Fatal(err)
	}
	// Three requests at $1.80, each earning its provider $0.72; a customer who bought no credit is overdrawn.
	inv := w.invoiceOf(acme, march)
	if s.InvoiceLines != int64(len(inv.Lines)) || s.InvoiceRequests != 3 || s.Charged != pico(5_400_000_000_000) ||
		s.Payable != pico(2_160_000_000_000) || s.Flagged[FlagNegativeBalance] != 1 || len(s.Flagged) != len(inv.Flags) {
		t.Fatalf("SumDocuments: %+v; the invoice: %d lines, flags %v", s, len(inv.Lines), inv.Flags)
	}
}
