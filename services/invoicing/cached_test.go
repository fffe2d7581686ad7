package invoicing

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// Cached input tokens on an invoice and a statement: the usage line keeps them apart with their
// price (March's standard price, $0.15 input, $0.0375 cached input, $0.30 output per million
// tokens) and its charge is exactly its tokens at its prices, to the picodollar, rounded once
// to the cent; the provider's statement line pays them at its input ask scaled the same way
// ($0.06 to $0.015), exactly too. A request that produced no output charges nothing, cached or
// not.
func TestCachedInputTokensFootOnInvoiceAndStatement(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), 10_00)
	at := time.Date(2026, 3, 5, 12, 0, 0, 0, time.UTC)
	w.use(request{customer: acme, rig: fjord, at: at, in: 4_000_000, cached: 3_200_000, out: 1_000_000})
	w.use(request{customer: acme, rig: fjord, at: at.Add(time.Hour), in: 1_234_567, cached: 1_000_003, out: 333_333})
	w.use(request{customer: acme, rig: fjord, at: at.Add(2 * time.Hour), in: 5_000, cached: 4_000, out: 0})
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)

	inv := w.invoiceOf(acme, march)
	if len(inv.Lines) != 1 {
		t.Fatalf("invoice lines %+v, want one usage line", inv.Lines)
	}
	l := inv.Lines[0]
	// 1,034,564 x $0.15/M + 4,200,003 x $0.0375/M + 1,333,333 x $0.30/M = $0.7126846125.
	if l.InputTokens != 5_239_567 || l.CachedInputTokens != 4_204_003 || l.UnchargedInputTokens != 5_000 ||
		l.UnchargedCachedInputTokens != 4_000 || l.ChargedUncachedInputTokens() != 1_034_564 ||
		l.ChargedCachedInputTokens() != 4_200_003 || l.CachedInputPrice == nil || *l.CachedInputPrice != 37_500 ||
		l.Charge.Decimal(12) != "0.712684612500" || l.Amount != 71 {
		t.Fatalf("usage line %+v (charge %s)", l, l.Charge.Decimal(12))
	}
	footed := mul(l.ChargedUncachedInputTokens(), int64(*l.InputPrice)).Add(mul(l.ChargedCachedInputTokens(), int64(*l.CachedInputPrice))).
		Add(mul(l.ChargedOutputTokens(), int64(*l.OutputPrice)))
	if footed != l.Charge {
		t.Errorf("the line's tokens at its prices come to %s, its charge is %s", footed.Decimal(12), l.Charge.Decimal(12))
	}
	if slices.Contains(inv.Flags, FlagUsageMismatch) {
		t.Errorf("the invoice is flagged %v: its lines do not foot with their prices", inv.Flags)
	}
	if inv.Total != 71 {
		t.Errorf("invoice total %s, want $0.71", inv.Total)
	}
	if !strings.Contains(l.Description, "$0.0375 cached input") ||
		!strings.Contains(l.Description, "4,204,003 of the input tokens were served from the prompt cache") {
		t.Errorf("description %q does not name the cached input tokens and their price", l.Description)
	}

	// The document shows the cached input tokens apart: on the printed sheet under the line,
	// in the CSV in their own columns.
	d, err := InvoiceDocument(inv)
	if err != nil {
		t.Fatal(err)
	}
	if tk := d.Lines[0].Tokens; tk == nil || tk.Input != 5_239_567 || tk.CachedInput != 4_204_003 || tk.CachedInputPrice != 37_500 {
		t.Errorf("document line tokens %+v", d.Lines[0].Tokens)
	}
	sheet, err := d.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	if detail := sheet.Lines[0].Detail; !strings.Contains(detail, "Of the input, 4,204,003 tokens cached, at "+
		money.FormatPrice(37_500)+" per million") {
		t.Errorf("sheet line detail %q", detail)
	}
	var buf bytes.Buffer
	if err := documents.LinesCSV(&buf, d); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(records) < 2 {
		t.Fatalf("lines CSV %q, %v", records, err)
	}
	col := func(name string) string { return records[1][slices.Index(records[0], name)] }
	if col("input_tokens") != "5239567" || col("cached_input_tokens") != "4204003" || col("cached_input_price_per_million") != "0.0375" ||
		col("exact_amount") != "0.712684612500" {
		t.Errorf("lines CSV %q", records)
	}

	st := w.statementOf(fjordAccount, march)
	if len(st.Lines) != 1 {
		t.Fatalf("statement lines %+v, want one usage line", st.Lines)
	}
	s := st.Lines[0]
	// 1,034,564 x $0.06/M + 4,200,003 x $0.015/M + 1,333,333 x $0.12/M = $0.285073845.
	if s.AskCachedInput != 15_000 || s.CachedInputTokens != 4_204_003 || s.UnchargedCachedInputTokens != 4_000 ||
		s.Earned.Decimal(12) != "0.285073845000" || s.Amount != 29 {
		t.Fatalf("statement line %+v (earned %s)", s, s.Earned.Decimal(12))
	}
	if slices.Contains(st.Flags, FlagUsageMismatch) {
		t.Errorf("the statement is flagged %v: its lines do not foot with their asks", st.Flags)
	}
	if got := w.balance(ledger.AccountProviderPayable, fjordAccount); !got.Equal(money.Pico(285_073_845_000)) {
		t.Errorf("provider payable %s, want $0.285073845", got)
	}
}
