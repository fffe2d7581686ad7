package invoicing

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
)

// printedCents reads an amount as a document prints it ("$1,234.56", "-$0.01") back into cents.
func printedCents(t *testing.T, s string) int64 {
	t.Helper()
	p, err := money.ParseUSD(strings.ReplaceAll(s, ",", ""))
	if err != nil || p%money.PicoPerCent != 0 {
		t.Fatalf("%q is not an amount in cents: %v", s, err)
	}
	return int64(p / money.PicoPerCent)
}

// An invoice whose every figure is a fraction of a cent off: an opening balance of
// $9.9959998 (February's $10.00 less a request of $0.0040002), $20.00 bought in March, two
// usage lines of $0.006 each at March's two price versions. Rounded on their own the printed
// figures would read $10.00 + $20.00 - $0.01 = $29.99 against a closing balance of $29.98 and
// a total of $0.02 against $0.01 charged: the document prints a rounding line of -$0.01 and
// says what the balance was charged, so that what is printed adds up, cent for cent.
func TestAnInvoiceFootsToTheCent(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.buy(acme, time.Date(2026, 2, 2, 9, 0, 0, 0, time.UTC), 10_00)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 2, 10, 12, 0, 0, 0, time.UTC), in: 20_000, out: 3_334})
	w.at(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC))
	w.close(MonthPeriod(2026, time.February))
	w.buy(acme, time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC), 20_00)
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), in: 20_000, out: 10_000}) // $0.006
	w.use(request{customer: acme, rig: fjord, at: time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC), in: 5_000, out: 10_000})  // $0.006
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	inv := w.invoiceOf(acme, march)

	if inv.Balance.Opening.Decimal(12) != "9.995999800000" || inv.Balance.Closing.Decimal(12) != "29.983999800000" ||
		inv.Balance.UsageCharged.Decimal(12) != "-0.012000000000" || inv.Total != 2 {
		t.Fatalf("the invoice's figures: opening %s closing %s usage %s total %s", inv.Balance.Opening.Decimal(12),
			inv.Balance.Closing.Decimal(12), inv.Balance.UsageCharged.Decimal(12), inv.Total)
	}
	d, err := InvoiceDocument(inv)
	if err != nil {
		t.Fatal(err)
	}
	var credits []documents.Line
	for _, l := range d.Lines {
		if l.Kind == documents.LineCredits {
			credits = append(credits, l)
		}
	}
	if len(credits) != 3 || credits[0].Amount != 20_00 || credits[1].Amount != -1 ||
		credits[2].Description != RoundingDescription || credits[2].Amount != -1 || credits[2].Exact != nil {
		t.Errorf("the movements printed: %+v", credits)
	}
	if d.Totals.Balance.Opening != 10_00 || d.Totals.Balance.Closing != 29_98 || d.Totals.Total != 2 {
		t.Errorf("opening %d closing %d total %d cents, want $10.00, $29.98 and $0.02", d.Totals.Balance.Opening,
			d.Totals.Balance.Closing, d.Totals.Total)
	}
	if !slices.Contains(d.Notes, "The prepaid balance is charged each request's exact amount as it is metered, $0.01 in the period; "+
		"the total rounds each usage line to the cent.") {
		t.Errorf("notes %q", d.Notes)
	}

	// What the sheet (the page and the PDF) prints foots as printed: the lines add up to the
	// total, the opening balance and the movements to the closing balance.
	sheet, err := d.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	var lines int64
	for _, l := range sheet.Lines {
		lines += printedCents(t, l.Amount)
	}
	rows := map[string]int64{}
	var moved int64
	inBalance := false
	for _, r := range sheet.Totals {
		v := printedCents(t, r.Value)
		rows[r.Label] = v
		switch {
		case r.Label == "Opening balance":
			inBalance, moved = true, v
		case r.Label == "Closing balance":
			inBalance = false
		case inBalance:
			moved += v
		}
	}
	if lines != rows["Total"] || lines != 2 {
		t.Errorf("the printed lines add up to %d cents, the printed total is %d", lines, rows["Total"])
	}
	if moved != rows["Closing balance"] || moved != 29_98 {
		t.Errorf("the printed opening balance and movements add up to %d cents, the printed closing balance is %d (%+v)",
			moved, rows["Closing balance"], sheet.Totals)
	}
	got, _, _, err := BalanceInCents(inv)
	if err != nil || len(got) != 3 {
		t.Errorf("BalanceInCents: %+v, %v", got, err)
	}

	// The provider's statement of the same month: its lines at the asks, each a fraction of a
	// cent, add up to its total as printed, and the total is what it nets.
	st := w.statementOf(fjordAccount, march)
	sd, err := StatementDocument(st)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sd.Sheet()
	if err != nil {
		t.Fatal(err)
	}
	var earned int64
	for _, l := range ss.Lines {
		earned += printedCents(t, l.Amount)
	}
	var total int64 = -1
	for _, r := range ss.Totals {
		if r.Label == "Total" {
			total = printedCents(t, r.Value)
		}
	}
	if earned != total || Cents(total) != st.Net || st.Net != st.Payout+st.CarriedOut {
		t.Errorf("statement: lines %d cents, total %d, net %s, payout %s, carried out %s", earned, total, st.Net, st.Payout, st.CarriedOut)
	}
}
