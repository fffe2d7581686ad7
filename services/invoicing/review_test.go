package invoicing

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
)

// The review queue's flags: a total that differs from its usage rows (the close's exact check
// of a sample, and a line whose charge is not its tokens at its prices), a request the meter
// flagged, a negative balance (in TestBalancesAreTheirPostingsByLedgerTime) and a total more
// than three times the month before's. Finance filters the queue by them.
func TestTheReviewQueuesFlags(t *testing.T) {
	w := newWorld(t)
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	steady, spiky, clipped, counted, priced := w.account("Steady"), w.account("Spiky"), w.account("Clipped"),
		w.account("Counted"), w.account("Priced")
	for _, acc := range []string{steady, spiky, clipped, counted, priced} {
		w.buy(acc, time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC), 100_00)
		w.uses(acc, fjord, time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC), 1) // $1.80 in February
	}
	w.at(time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC))
	w.close(MonthPeriod(2026, time.February))

	w.uses(steady, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 3) // $5.40: three times, not more
	w.uses(spiky, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 4)  // $7.20: four times
	w.uses(counted, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	w.uses(priced, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	// The rig reports 1,000 output tokens; the gateway relayed 10: clipped and flagged.
	w.use(request{customer: clipped, rig: fjord, at: time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC), in: 1000, out: 1000, relayed: 10})
	// Rollups that no longer sum their rows: one counts a request more, one charges a
	// picodollar more.
	if _, err := w.pool.Exec(w.ctx(), `UPDATE usage_hourly SET requests = requests + 1 WHERE account_id = $1 AND hour >= $2`,
		counted, march.Start()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(w.ctx(), `UPDATE usage_hourly SET charge_pico = charge_pico + 1 WHERE account_id = $1 AND hour >= $2`,
		priced, march.Start()); err != nil {
		t.Fatal(err)
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	want := map[string][]Flag{
		steady: {}, spiky: {FlagSpike}, clipped: {FlagDiscrepancy}, counted: {FlagUsageMismatch}, priced: {FlagUsageMismatch},
	}
	for acc, flags := range want {
		inv := w.invoiceOf(acc, march)
		if got := slices.Clone(inv.Flags); !sameFlags(got, flags) {
			t.Errorf("%s: flags %v, want %v (total %s)", inv.AccountName, got, flags, inv.Total)
		}
	}
	page, err := w.svc.Invoices(w.ctx(), InvoiceFilter{Period: march, Flag: FlagUsageMismatch})
	if err != nil || len(page.Invoices) != 2 {
		t.Errorf("the queue filtered by usage_mismatch: %+v, %v", page.Invoices, err)
	}
	min, max := Cents(5_00), Cents(6_00)
	page, err = w.svc.Invoices(w.ctx(), InvoiceFilter{Period: march, MinTotal: &min, MaxTotal: &max})
	if err != nil || len(page.Invoices) != 1 || page.Invoices[0].AccountID != steady {
		t.Errorf("the queue filtered by total: %+v, %v", page.Invoices, err)
	}
	// The exact check, on demand, says what differs.
	check, err := w.svc.CheckInvoiceUsage(w.ctx(), w.invoiceOf(counted, march).ID)
	if err != nil || check.Matches || len(check.Differences) != 1 || check.Differences[0].RollupRequests != 2 ||
		check.Differences[0].RowRequests != 1 {
		t.Errorf("the check of the tampered rollup: %+v, %v", check, err)
	}
}

// A month whose usage rows were dropped after their retention has nothing to check its
// rollups against: the check says so and flags nothing, on demand or in a close run again.
func TestTheCheckOfAMonthWithoutItsRowsFlagsNothing(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	march := MonthPeriod(2026, 3)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 3)
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	if check, err := w.svc.CheckInvoiceUsage(w.ctx(), w.invoiceOf(acme, march).ID); err != nil || !check.Matches || check.RowsDropped {
		t.Fatalf("the check with the rows: %+v, %v", check, err)
	}
	// As the retention leaves the month: its rows gone, its rollups kept, the drop recorded.
	if _, err := w.pool.Exec(w.ctx(), `DELETE FROM usage_events WHERE occurred_at >= $1 AND occurred_at < $2`,
		march.Start(), march.End()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(w.ctx(), `INSERT INTO usage_months_dropped (month, events, dropped_at) VALUES ($1, 3, $2)`,
		march.Start(), march.End()); err != nil {
		t.Fatal(err)
	}
	check, err := w.svc.CheckInvoiceUsage(w.ctx(), w.invoiceOf(acme, march).ID)
	if err != nil || !check.RowsDropped || len(check.Differences) != 0 {
		t.Errorf("the check without the rows: %+v, %v; want rows_dropped and no difference", check, err)
	}
	w.close(march)
	if flags := w.invoiceOf(acme, march).Flags; slices.Contains(flags, FlagUsageMismatch) {
		t.Errorf("flags %v after a close without the rows: want no usage_mismatch", flags)
	}
}

func sameFlags(a, b []Flag) bool {
	slices.Sort(a)
	b = slices.Clone(b)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A customer sees its own invoices once issued, never a draft and never another account's; a
// provider its own statements likewise. A draft shows the customer's billing details as they
// are now; an issued invoice keeps the ones it was issued with.
func TestDocumentsAreScopedToTheirAccount(t *testing.T) {
	w := newWorld(t)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	fjordAccount, northwindAccount := w.account("Fjord GPU Co-op"), w.account("Northwind Compute")
	fjord := w.rig(fjordAccount)
	w.rig(northwindAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	w.uses(globex, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	set := func(name string) {
		if _, err := w.svc.SetBillingDetails(w.ctx(), acme, "", BillingDetailsInput{LegalName: name, Address: "1 Road", Country: "IE"}); err != nil {
			t.Fatal(err)
		}
	}
	set("Acme Labs Ltd")
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	mine, theirs := w.invoiceOf(acme, march), w.invoiceOf(globex, march)
	if _, err := w.svc.AccountInvoice(w.ctx(), acme, mine.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("a customer reading its draft: %v, want not found", err)
	}
	set("Acme Labs Limited")
	if d := w.mustInvoice(mine.ID); d.Buyer.LegalName != "Acme Labs Limited" || d.Buyer.CountryName != "Ireland" {
		t.Errorf("the draft shows %+v, want the details as they are now", d.Buyer)
	}
	w.approve(mine.ID, theirs.ID)
	set("Acme Renamed")
	got, err := w.svc.AccountInvoice(w.ctx(), acme, mine.ID)
	if err != nil || got.Buyer.LegalName != "Acme Labs Limited" || got.Total != 1_80 {
		t.Errorf("the issued invoice as its customer reads it: %+v, %v", got.Buyer, err)
	}
	if _, err := w.svc.AccountInvoice(w.ctx(), acme, theirs.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("a customer reading another's invoice: %v, want not found", err)
	}
	list, err := w.svc.AccountInvoices(w.ctx(), acme)
	if err != nil || len(list) != 1 || list[0].ID != mine.ID {
		t.Errorf("the customer's invoices: %+v, %v", list, err)
	}
	st := w.statementOf(fjordAccount, march)
	if _, err := w.svc.ProviderStatement(w.ctx(), fjordAccount, st.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("a provider reading its draft: %v", err)
	}
	w.approveStatement(st.ID)
	if _, err := w.svc.ProviderStatement(w.ctx(), northwindAccount, st.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("a provider reading another's statement: %v", err)
	}
	if got, err := w.svc.ProviderStatement(w.ctx(), fjordAccount, st.ID); err != nil || got.Earnings != 1_44 {
		t.Errorf("the provider's statement: %+v, %v", got, err)
	}
	if list, err := w.svc.ProviderStatements(w.ctx(), northwindAccount); err != nil || len(list) != 0 {
		t.Errorf("Northwind's statements: %+v, %v", list, err)
	}
}

// A customer reads its own invoices and credit notes as documents: finance's review flags, the
// actions only finance takes and the finance users who took them are not in them. Another
// account's credit notes are not listed, and a regenerated draft is not the customer's yet.
func TestCustomersReadTheirDocumentsWithoutFinancesNotes(t *testing.T) {
	w := newWorld(t)
	acme, globex := w.account("Acme Labs"), w.account("Globex")
	fjordAccount := w.account("Fjord GPU Co-op")
	fjord := w.rig(fjordAccount)
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 2) // $3.60, on no credit
	w.uses(globex, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	mine, theirs := w.invoiceOf(acme, march), w.invoiceOf(globex, march)
	w.approve(mine.ID, theirs.ID)
	voided, err := w.svc.VoidInvoice(w.ctx(), VoidInput{ID: mine.ID, By: w.finance, Reason: VoidWrongDetails})
	if err != nil {
		t.Fatal(err)
	}
	asFinance := w.mustInvoice(mine.ID)
	if len(asFinance.Flags) == 0 || asFinance.IssuedBy != "finance@example.test" || asFinance.VoidedBy != "finance@example.test" {
		t.Fatalf("finance's view: flags %v, issued by %q, voided by %q", asFinance.Flags, asFinance.IssuedBy, asFinance.VoidedBy)
	}
	got, err := w.svc.AccountInvoice(w.ctx(), acme, mine.ID)
	if err != nil || got.Status != StatusVoid || got.Total != 3_60 || len(got.Lines) != 1 || len(got.Flags) != 0 || got.Flags == nil ||
		len(got.Actions) != 0 || got.Actions == nil || got.IssuedBy != "" || got.VoidedBy != "" || got.VoidReason != VoidWrongDetails ||
		len(got.CreditNotes) != 1 || got.CreditNotes[0].InvoiceNumber != got.Number {
		t.Fatalf("the customer's view: %+v, %v", got, err)
	}
	list, err := w.svc.AccountInvoices(w.ctx(), acme)
	if err != nil || len(list) != 1 || list[0].ID != mine.ID || len(list[0].Flags) != 0 || len(list[0].Actions) != 0 {
		t.Fatalf("the customer's invoices: %+v, %v", list, err)
	}
	if _, err := w.svc.AccountInvoice(w.ctx(), acme, voided.RegeneratedID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("the regenerated draft as its customer reads it: %v, want not found", err)
	}
	notes, err := w.svc.AccountCreditNotes(w.ctx(), acme)
	if err != nil || len(notes) != 1 || notes[0].ID != voided.CreditNoteID || notes[0].Number != got.Number+"-CN01" ||
		notes[0].InvoiceID != mine.ID || notes[0].InvoiceNumber != got.Number || notes[0].Period != march ||
		notes[0].Amount != 3_60 || notes[0].Reason != VoidWrongDetails {
		t.Fatalf("the customer's credit notes: %+v, %v", notes, err)
	}
	if others, err := w.svc.AccountCreditNotes(w.ctx(), globex); err != nil || len(others) != 0 {
		t.Errorf("Globex's credit notes: %+v, %v", others, err)
	}
	note, err := w.svc.AccountCreditNote(w.ctx(), acme, voided.CreditNoteID)
	if err != nil || note.IssuedBy != "" || note.Amount != 3_60 {
		t.Errorf("the customer's credit note: issued by %q, %s, %v", note.IssuedBy, note.Amount, err)
	}
	if _, err := w.svc.AccountCreditNote(w.ctx(), globex, voided.CreditNoteID); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("another account's credit note: %v, want not found", err)
	}

	st := w.statementOf(fjordAccount, march)
	w.approveStatement(st.ID)
	mineSt, err := w.svc.ProviderStatement(w.ctx(), fjordAccount, st.ID)
	if err != nil || len(mineSt.Actions) != 0 || mineSt.IssuedBy != "" || mineSt.Earnings != 2_16 {
		t.Fatalf("the provider's statement: actions %v, issued by %q, earnings %s, %v", mineSt.Actions, mineSt.IssuedBy, mineSt.Earnings, err)
	}
	sts, err := w.svc.ProviderStatements(w.ctx(), fjordAccount)
	if err != nil || len(sts) != 1 || len(sts[0].Actions) != 0 || sts[0].Earnings != 2_16 || sts[0].CarriedOut != 2_16 ||
		sts[0].CarriedIn != 0 || sts[0].Clawbacks != 0 {
		t.Fatalf("the provider's statements: %+v, %v", sts, err)
	}
}

// The close reports its progress chunk by chunk, keeps it where finance pages poll it, and is
// recorded in the audit log; a close with nobody behind it is the platform's.
func TestTheCloseReportsItsProgress(t *testing.T) {
	w := newWorld(t, func(c *Config) { c.Chunk = 2 })
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	for range 5 {
		w.uses(w.account("Customer"), fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	var seen []CloseProgress
	done, err := w.svc.Close(w.ctx(), CloseInput{Period: march, Progress: func(p CloseProgress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	// The lists, three chunks of customers, one of providers, and the end.
	if len(seen) != 6 || seen[1].CustomersDone != 2 || seen[3].CustomersDone != 5 || seen[3].CustomersTotal != 5 ||
		seen[4].ProvidersDone != 1 || seen[5].Status != CloseDone || done.Invoices != 5 || done.Statements != 1 {
		t.Fatalf("progress %+v, done %+v", seen, done)
	}
	polled, err := w.svc.CloseProgressOf(w.ctx(), march)
	if err != nil || polled.Status != CloseDone || polled.StartedBy != audit.SystemActor || polled.Invoices != 5 ||
		polled.FinishedAt == nil || !polled.FinishedAt.Equal(w.clock()) {
		t.Errorf("the close as pages poll it: %+v, %v", polled, err)
	}
	page, err := w.audit.List(w.ctx(), audit.Filter{Action: audit.ActionClose})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Actor != audit.SystemActor || page.Entries[0].SubjectID != "2026-03" {
		t.Errorf("the close in the audit log: %+v, %v", page.Entries, err)
	}
	if _, err := w.svc.CloseProgressOf(w.ctx(), april); services.ErrorCode(err) != services.CodeNotFound {
		t.Errorf("the progress of a period never closed: %v", err)
	}
}

// A close of a period that ended before the platform's first usage is refused, saying which
// period is the first to close; on a platform with no usage at all, every close is. The
// automatic close never offers such a period, and nothing is recorded for a refused one.
func TestACloseBeforeTheFirstUsageIsRefused(t *testing.T) {
	w := newWorld(t)
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	_, err := w.svc.Close(w.ctx(), CloseInput{Period: march, By: w.finance})
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Code != services.CodeInvalid || !strings.Contains(ae.Fields["period"], "no usage") {
		t.Fatalf("closing March on a platform with no usage: %v", err)
	}
	if due, err := w.svc.DuePeriods(w.ctx()); err != nil || len(due) != 0 {
		t.Fatalf("due with no usage: %v, %v", due, err)
	}

	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.uses(acme, fjord, time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 1) // the first usage: April's first hour
	for _, p := range []Period{MonthPeriod(2025, time.December), march} {
		_, err := w.svc.Close(w.ctx(), CloseInput{Period: p, By: w.finance})
		if !errors.As(err, &ae) || ae.Code != services.CodeInvalid ||
			ae.Fields["period"] != p.String()+" ended before the platform's first usage (2026-04-01 00:00 UTC): there is nothing to close. The first period to close is 2026-04." {
			t.Fatalf("closing %s: %v", p, err)
		}
	}
	var closes int
	w.scan(`SELECT count(*) FROM invoice_closes`, nil, &closes)
	if closes != 0 {
		t.Fatalf("%d closes recorded for refused periods", closes)
	}
	w.at(time.Date(2026, 6, 5, 0, 0, 0, 0, time.UTC))
	due, err := w.svc.DuePeriods(w.ctx())
	if err != nil || len(due) != 1 || due[0] != MonthPeriod(2026, time.May) {
		t.Fatalf("due in June: %v, %v; want May, the last period past its grace", due, err)
	}
	if pr := w.close(april); pr.Status != CloseDone || pr.Invoices != 1 || w.invoiceOf(acme, april).Total != 2_50 { // at the price from March 16
		t.Fatalf("closing April, the first usage's period: %+v", pr)
	}
}

// The platform closes a period by itself once its grace (72 hours) has passed, every period
// from the first it closed on, and two processes doing it at once make one document each.
func TestTheCloseRunsByItselfOnceTheGraceHasPassed(t *testing.T) {
	w := newWorld(t)
	acme := w.account("Acme Labs")
	fjord := w.rig(w.account("Fjord GPU Co-op"))
	w.uses(acme, fjord, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 1)
	w.uses(acme, fjord, time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 1)

	w.at(time.Date(2026, 4, 3, 23, 59, 59, 0, time.UTC))
	if due, err := w.svc.DuePeriods(w.ctx()); err != nil || len(due) != 0 {
		t.Fatalf("due 71 hours into April: %v, %v; want none: March's grace has not passed, February is before the first usage", due, err)
	}
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := w.svc.CloseDue(w.ctx()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var invoices int
	w.scan(`SELECT count(*) FROM invoices WHERE account_id = $1`, []any{acme}, &invoices)
	if invoices != 1 || w.invoiceOf(acme, march).Total != 1_80 {
		t.Fatalf("%d invoices after two automatic closes at once, want March's", invoices)
	}
	if due, _ := w.svc.DuePeriods(w.ctx()); len(due) != 0 {
		t.Errorf("due once March is closed: %v", due)
	}
	// Down for two months: April and May are both due, oldest first.
	w.at(time.Date(2026, 6, 5, 0, 0, 0, 0, time.UTC))
	due, err := w.svc.DuePeriods(w.ctx())
	if err != nil || len(due) != 2 || due[0] != april || due[1] != MonthPeriod(2026, time.May) {
		t.Fatalf("due in June: %v, %v", due, err)
	}
	closed, err := w.svc.CloseDue(w.ctx())
	if err != nil || len(closed) != 2 || closed[0].Invoices != 1 || closed[1].Invoices != 0 {
		t.Errorf("closing April and May: %+v, %v", closed, err)
	}
}
