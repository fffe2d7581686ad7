// Package documents renders the platform's financial documents, customer invoices, credit
// notes and provider statements, as a PDF, as the text of a print-ready page and as CSV of
// their lines; and it writes the month's journal, every ledger posting, as CSV for
// accounting.
//
// A Document is a view model: plain values that the invoicing side fills from what it stored,
// so that rendering depends on no storage. Money in it is exact: amounts are integer cents of
// the document's currency and prices integer millionths of it per million tokens; nothing
// passes through a float. One Sheet, the document laid out as text, feeds the PDF and the
// page alike, so the two show the same figures. The same Document always renders to the
// same bytes: the PDF's dates are the document's own and nothing in it depends on the clock
// or on map order (see docs/documents.md).
//
// The journal (journal.go) reads the ledger's postings through package ledger
// (ledger.JournalPostings) and their owners' names through package accounts
// (accounts.NamesByID), and writes nothing. The package has no tables and names none in its SQL.
package documents

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// Kind is what a document is.
type Kind string

const (
	KindInvoice    Kind = "invoice"            // what a customer owes for a period
	KindCreditNote Kind = "credit_note"        // takes back all or part of an issued invoice
	KindStatement  Kind = "provider_statement" // what the platform owes a provider for a period
)

// Status is where a document is in its life.
type Status string

const (
	StatusDraft  Status = "draft"  // computed, not yet approved: it has no number
	StatusIssued Status = "issued" // approved and numbered; it never changes again
	StatusPaid   Status = "paid"
	StatusVoid   Status = "void" // cancelled by a credit note; it keeps its number
)

// Document is a financial document as it is shown.
type Document struct {
	Kind Kind
	// Number is the legal number given at finalisation ("GPM-2026-000001", a credit note
	// "GPM-2026-000001-CN01"); a draft has none and shows "DRAFT".
	Number    string
	Status    Status
	IssueDate time.Time // the date the document bears; a draft's is the day it was drawn up
	Period    Period    // the period it covers
	DueDate   time.Time // zero when the document asks for no payment (a prepaid invoice, a statement)
	// Currency is the ISO 4217 code of every amount and price ("USD").
	Currency string
	// Seller and Buyer are the two parties. On an invoice or a credit note the platform sells
	// and the customer buys; on a provider statement the provider sells its serving to the
	// platform, which issues the statement on the provider's behalf.
	Seller Party
	Buyer  Party
	Lines  []Line
	Totals Totals
	// Notes are printed under the totals, in order: the rounding rule, the invoice a credit
	// note takes back and why, payment terms.
	Notes []string
	// Summary is a block of labelled figures (what the customer saved, the carbon of its
	// tokens), printed only when it has some.
	Summary []Figure
	// Charts illustrate the summary: each is drawn as an image under it in the PDF, and as
	// its table of numbers on the page.
	Charts []BarChart
}

// BarChart is a chart of a document's summary: one bar per series in each category, such as
// spend against the baseline per tier. Its values are figures for the eye, already shown
// exactly in the summary; they never feed a total.
type BarChart struct {
	Title  string
	Unit   string   // what the values are in: "USD", "gCO2e"
	Labels []string // the categories, in order
	Series []BarSeries
}

// BarSeries is one series of a BarChart: a value per label.
type BarSeries struct {
	Name   string
	Values []float64
}

// Party is the seller or the buyer of a document.
type Party struct {
	LegalName string
	Address   []string // street, postcode and city, ... as the party wrote them
	Country   string   // as printed: "Poland"
	VATID     string   // "" when the party has none
	PONumber  string   // the buyer's purchase order; "" for none
}

// LineKind is what a line records.
type LineKind string

const (
	LineUsage LineKind = "usage" // tokens of one tier and model at one price
	// LineCredits is prepaid credit bought (or, negative, refunded) in the period: it moves
	// the buyer's balance, is printed with it, and is not part of the subtotal.
	LineCredits    LineKind = "credits"
	LineAdjustment LineKind = "adjustment" // a correction made by finance
	// LineLateUsage is usage of an earlier period that arrived after that period's document
	// was issued; it names the period (ForPeriod).
	LineLateUsage LineKind = "late_usage"
)

// Line is one line of a document.
type Line struct {
	Kind LineKind
	// Description says what the line is, e.g. "standard · meta-llama/Meta-Llama-3-8B-Instruct"
	// or "Credits bought on 2026-03-04".
	Description string
	// Tokens are the line's tokens and their unit prices: required on a usage line, allowed on
	// a late-usage line, absent on the others.
	Tokens *Tokens
	// ForPeriod is the earlier period a late-usage line's tokens belong to.
	ForPeriod *Period
	// Amount is the line's amount in cents, rounded once from its exact amount by the rule
	// the invoicing side states in a note. Signed: a clawback or a credit in the buyer's
	// favour is negative.
	Amount Cents
	// Exact is the amount before rounding, in 1e-12 of the currency (money.BigPico's unit,
	// picodollars in US dollars), when the line has one; the CSV carries it beside Amount.
	Exact *money.BigPico
}

// Tokens are the tokens a line bills and the prices per million tokens it bills them at.
type Tokens struct {
	Input, Output int64
	// InputPrice and OutputPrice are per million tokens, in millionths of the currency
	// (money.MicroUSD's unit); on a statement, the provider's asks.
	InputPrice, OutputPrice money.MicroUSD
	// Unpriced marks tokens whose unit prices were not recorded (usage metered before its
	// route tickets carried the price): the prices print as "—", the CSV leaves them empty,
	// and both prices are zero.
	Unpriced bool
	// CachedInput are the input tokens the engine served from its prompt cache, a part of
	// Input, billed at CachedInputPrice (on a statement, the provider's cached input ask)
	// rather than InputPrice; 0 when none were.
	CachedInput      int64
	CachedInputPrice money.MicroUSD
}

// Totals are the figures under the lines.
type Totals struct {
	// Subtotal is the sum of the amounts of every line but the credits lines; Validate
	// refuses a document whose lines do not add up to it.
	Subtotal Cents
	Total    Cents
	// AmountDue is what the buyer pays (on a statement, what the provider is paid): zero when
	// prepaid credit covered it; never negative.
	AmountDue Cents
	// Balance is the buyer's prepaid credit before and after the period; nil on documents
	// that have none (a credit note, a statement).
	Balance *Balance
}

// Balance is a prepaid balance at the start and at the end of the period.
type Balance struct {
	Opening, Closing Cents
}

// Figure is a labelled value, preformatted by whoever computed it ("Carbon", "1.84 kg CO₂e").
type Figure struct {
	Label, Value string
}

// Period is a span of time [Start, End); billing periods are calendar months in UTC.
type Period struct {
	Start, End time.Time
}

// Month is the calendar month of year and month in UTC.
func Month(year int, month time.Month) Period {
	start := time.Date(year, month, 1, 0, 0, 0, 0, time.UTC)
	return Period{Start: start, End: start.AddDate(0, 1, 0)}
}

// ParseMonth reads a month written "2026-03".
func ParseMonth(s string) (Period, error) {
	t, err := time.Parse("2006-01", strings.TrimSpace(s))
	if err != nil {
		return Period{}, services.Errorf(services.CodeInvalid, "Give the period as a month, like 2026-03.")
	}
	return Month(t.Year(), t.Month()), nil
}

// IsMonth reports whether p is exactly one calendar month in UTC.
func (p Period) IsMonth() bool {
	s := p.Start.UTC()
	return s.Equal(time.Date(s.Year(), s.Month(), 1, 0, 0, 0, 0, time.UTC)) && p.End.Equal(s.AddDate(0, 1, 0))
}

// String writes a calendar month as "March 2026" and any other period by its first and last
// days, "2026-03-01 – 2026-03-15".
func (p Period) String() string {
	if p.IsMonth() {
		return p.Start.UTC().Format("January 2006")
	}
	last := p.End.UTC().Add(-time.Nanosecond)
	return p.Start.UTC().Format(time.DateOnly) + " – " + last.Format(time.DateOnly)
}

// Limits of what one document may hold, so that a render's size is bounded.
const (
	MaxLines       = 10_000
	MaxTextLength  = 500 // any one piece of text: a description, a note, an address line
	MaxNotes       = 20
	MaxSummary     = 8
	MaxAddressRows = 6
)

// Validate checks that the document can be shown honestly: a known kind and status, a
// number exactly when it is not a draft, its dates and currency, the parties' legal names,
// lines whose kind fits what they carry, and text within its limits.
func (d Document) Validate() error {
	fe := services.FieldErrors{}
	switch d.Kind {
	case KindInvoice, KindCreditNote, KindStatement:
	default:
		fe.Add("kind", fmt.Sprintf("unknown document kind %q", d.Kind))
	}
	switch d.Status {
	case StatusDraft:
		if d.Number != "" {
			fe.Add("number", "a draft has no number: it is given at finalisation")
		}
	case StatusIssued, StatusPaid, StatusVoid:
		if strings.TrimSpace(d.Number) == "" {
			fe.Add("number", "a finalised document needs its number")
		}
	default:
		fe.Add("status", fmt.Sprintf("unknown status %q", d.Status))
	}
	if d.IssueDate.IsZero() {
		fe.Add("issue_date", "the document needs the date it bears")
	}
	if d.Period.Start.IsZero() || !d.Period.End.After(d.Period.Start) {
		fe.Add("period", "the period needs a start before its end")
	}
	if !validCurrency(d.Currency) {
		fe.Add("currency", "give the currency as an ISO 4217 code, like USD")
	}
	checkParty(fe, "seller", d.Seller)
	checkParty(fe, "buyer", d.Buyer)
	if len(d.Lines) > MaxLines {
		fe.Add("lines", fmt.Sprintf("at most %d lines", MaxLines))
	}
	for i, l := range d.Lines {
		if p := l.problem(d.Period); p != "" {
			fe.Add(fmt.Sprintf("lines[%d]", i), p)
		}
		if l.Kind == LineCredits && d.Totals.Balance == nil {
			fe.Add(fmt.Sprintf("lines[%d]", i), "credits are printed with the balance they move: give the opening and closing balance")
		}
	}
	checkTotals(fe, d)
	if len(d.Notes) > MaxNotes {
		fe.Add("notes", fmt.Sprintf("at most %d notes", MaxNotes))
	}
	for i, n := range d.Notes {
		checkText(fe, fmt.Sprintf("notes[%d]", i), n, true)
	}
	if len(d.Summary) > MaxSummary {
		fe.Add("summary", fmt.Sprintf("at most %d figures", MaxSummary))
	}
	for i, f := range d.Summary {
		checkText(fe, fmt.Sprintf("summary[%d].label", i), f.Label, true)
		checkText(fe, fmt.Sprintf("summary[%d].value", i), f.Value, true)
	}
	checkCharts(fe, d.Charts)
	return fe.Err()
}

func (l Line) problem(period Period) string {
	if strings.TrimSpace(l.Description) == "" {
		return "a line needs a description"
	}
	if p := textProblem(l.Description); p != "" {
		return p
	}
	switch l.Kind {
	case LineUsage:
		if l.Tokens == nil {
			return "a usage line needs its tokens and prices"
		}
	case LineLateUsage:
		if l.ForPeriod == nil || l.ForPeriod.Start.IsZero() || !l.ForPeriod.End.After(l.ForPeriod.Start) {
			return "a late-usage line names the earlier period its usage belongs to"
		}
		if !l.ForPeriod.Start.Before(period.Start) {
			return "a late-usage line's period comes before the document's"
		}
	case LineCredits, LineAdjustment:
		if l.Tokens != nil {
			return fmt.Sprintf("a %s line carries no tokens", l.Kind)
		}
	default:
		return fmt.Sprintf("unknown line kind %q", l.Kind)
	}
	if l.Kind != LineLateUsage && l.ForPeriod != nil {
		return "only a late-usage line names another period"
	}
	if t := l.Tokens; t != nil && (t.Input < 0 || t.Output < 0 || t.InputPrice < 0 || t.OutputPrice < 0 ||
		t.CachedInput < 0 || t.CachedInputPrice < 0) {
		return "tokens and prices are never negative"
	}
	if t := l.Tokens; t != nil && t.CachedInput > t.Input {
		return "cached input tokens are a part of the input tokens"
	}
	if t := l.Tokens; t != nil && t.Unpriced && (t.InputPrice != 0 || t.OutputPrice != 0) {
		return "tokens without recorded prices carry no prices"
	}
	return ""
}

// checkTotals refuses totals that the lines do not add up to, and amounts a document can
// never show: a negative amount due, or an invoice whose total is negative.
func checkTotals(fe services.FieldErrors, d Document) {
	sum, ok := Cents(0), true
	for _, l := range d.Lines {
		if l.Kind == LineCredits {
			continue
		}
		if sum, ok = addCents(sum, l.Amount); !ok {
			fe.Add("lines", "the lines add up to more than a document can hold")
			return
		}
	}
	if sum != d.Totals.Subtotal {
		fe.Add("totals.subtotal", fmt.Sprintf("the lines add up to %s, not %s", sum.Decimal(), d.Totals.Subtotal.Decimal()))
	}
	if d.Totals.AmountDue < 0 {
		fe.Add("totals.amount_due", "an amount due is never negative")
	}
	if d.Kind == KindInvoice && d.Totals.Total < 0 {
		fe.Add("totals.total", "an invoice's total is never negative: a credit is a credit note")
	}
}

// addCents returns a+b, and false when the sum does not fit in a Cents.
func addCents(a, b Cents) (Cents, bool) {
	s := a + b
	if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
		return 0, false
	}
	return s, true
}

func checkParty(fe services.FieldErrors, field string, p Party) {
	if strings.TrimSpace(p.LegalName) == "" {
		fe.Add(field+".legal_name", "the document names both parties by their legal names")
	}
	if len(p.Address) > MaxAddressRows {
		fe.Add(field+".address", fmt.Sprintf("at most %d address lines", MaxAddressRows))
	}
	checkText(fe, field+".legal_name", p.LegalName, false)
	for i, a := range p.Address {
		checkText(fe, fmt.Sprintf("%s.address[%d]", field, i), a, false)
	}
	checkText(fe, field+".country", p.Country, false)
	checkText(fe, field+".vat_id", p.VATID, false)
	checkText(fe, field+".po_number", p.PONumber, false)
}

func checkText(fe services.FieldErrors, field, s string, required bool) {
	if required && strings.TrimSpace(s) == "" {
		fe.Add(field, "must not be empty")
	}
	if p := textProblem(s); p != "" {
		fe.Add(field, p)
	}
}

// textProblem refuses text too long to lay out, control characters, which would break a
// line of the PDF or of the page where the document's author did not mean one, and
// characters the font cannot print.
func textProblem(s string) string {
	if len([]rune(s)) > MaxTextLength {
		return fmt.Sprintf("at most %d characters", MaxTextLength)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "must not contain control characters"
		}
	}
	if err := Printable(s); err != nil {
		return err.Error()
	}
	return ""
}

// FileName is the name a document's file is saved under, without its extension: its number, or
// DRAFT-<period> for a draft ("DRAFT-2026-03"), with any character other than letters, digits,
// '-', '_' and '.' made '_', so that a number format with a slash makes no folder.
func FileName(d Document) string {
	name := d.Number
	if d.Status == StatusDraft || name == "" {
		name = "DRAFT-" + d.Period.Start.UTC().Format("2006-01")
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name)
}
