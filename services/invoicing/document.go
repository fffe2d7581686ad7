package invoicing

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
)

// Invoices, credit notes and statements as package documents prints them: the page, the PDF
// and the CSV of lines are all rendered from what these functions return (see
// docs/invoicing.md, "Pages and API", and docs/documents.md, "Mapping the invoicing side's
// documents"). The mapping is exact: a document's lines are the stored lines, one for one and
// in order, with their cents and exact amounts; its subtotal and total are the stored total;
// the rounding rule is stated in its notes. Nothing is computed again.

// roundingNote is the rounding rule (CentsOf) as every document states it.
const roundingNote = "Each line's amount is its exact amount rounded once to the cent, half a cent away from zero; " +
	"the total is the sum of the lines' amounts."

// balanceNote says how the prepaid balance under an invoice's total is made.
const balanceNote = "The prepaid balance is the ledger's, by the time each movement was posted. The opening and the " +
	"closing balance and each movement between them are rounded to the cent on their own; where those roundings do " +
	"not add up, a rounding line says by how much, so that the opening balance and the movements printed add up to the " +
	"closing balance printed."

// Movement is one printed movement of an invoice's prepaid balance: a ledger transaction of the
// period, the usage the ledger charged, or the rounding that makes the printed figures add up.
type Movement struct {
	Description string
	Amount      Cents
	Exact       *money.BigPico // nil on the rounding line
}

// RoundingDescription names the movement that makes an invoice's printed balance foot.
const RoundingDescription = "Rounding of the figures above to the cent"

// BalanceInCents is an invoice's prepaid balance as its document and its page print it: the
// opening and the closing balance each rounded once to the cent (so the closing balance is the
// one the credits page shows), the period's movements each rounded once, and, when those do
// not add up, a rounding movement of the difference. Opening plus the movements is always the
// closing balance, to the cent (docs/money.md, "Documents foot").
func BalanceInCents(inv Invoice) (movements []Movement, opening, closing Cents, err error) {
	if opening, err = CentsOf(inv.Balance.Opening); err != nil {
		return nil, 0, 0, err
	}
	if closing, err = CentsOf(inv.Balance.Closing); err != nil {
		return nil, 0, 0, err
	}
	sum := opening
	add := func(desc string, exactAmount money.BigPico) error {
		c, err := CentsOf(exactAmount)
		if err != nil {
			return err
		}
		movements = append(movements, Movement{Description: desc, Amount: c, Exact: exact(exactAmount)})
		sum += c
		return nil
	}
	for _, e := range inv.Entries {
		if err := add(entryDescription(e), e.Amount); err != nil {
			return nil, 0, 0, err
		}
	}
	if inv.Balance.UsageCharged.Sign() != 0 {
		if err := add("Usage charged in the period", inv.Balance.UsageCharged); err != nil {
			return nil, 0, 0, err
		}
	}
	if r := closing - sum; r != 0 {
		movements = append(movements, Movement{Description: RoundingDescription, Amount: r})
	}
	return movements, opening, closing, nil
}

// InvoiceDocument is the invoice as a document. Its usage, late-usage and credit lines are the
// invoice's; the period's purchases, refunds, adjustments, credit notes and the usage charged
// by the ledger are printed with the prepaid balance they moved.
func InvoiceDocument(inv Invoice) (documents.Document, error) {
	d := documents.Document{
		Kind: documents.KindInvoice, Number: inv.Number, Status: documentStatus(inv.Status),
		IssueDate: issueDate(inv.Status, inv.IssuedAt, inv.CreatedAt),
		Period:    documentPeriod(inv.Period), Currency: currencyCode(inv.Currency),
		Seller: documentParty(inv.Seller, ""), Buyer: documentParty(inv.Buyer, inv.PONumber),
	}
	for _, l := range inv.Lines {
		d.Lines = append(d.Lines, invoiceLine(l))
	}
	movements, opening, closing, err := BalanceInCents(inv)
	if err != nil {
		return documents.Document{}, err
	}
	for _, m := range movements {
		d.Lines = append(d.Lines, documents.Line{Kind: documents.LineCredits, Description: m.Description,
			Amount: documents.Cents(m.Amount), Exact: m.Exact})
	}
	d.Totals = documents.Totals{Subtotal: documents.Cents(inv.Total), Total: documents.Cents(inv.Total),
		AmountDue: documents.Cents(inv.AmountDue), Balance: &documents.Balance{Opening: documents.Cents(opening), Closing: documents.Cents(closing)}}

	d.Summary, d.Charts = invoiceSummaryFigures(inv.Summary)
	d.Notes = append(d.Notes, roundingNote, balanceNote)
	if usage, err := CentsOf(inv.Balance.UsageCharged.Neg()); err == nil && usage != inv.Total && inv.Balance.UsageCharged.Sign() != 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("The prepaid balance is charged each request's exact amount as it is metered, %s "+
			"in the period; the total rounds each usage line to the cent.", money.FormatCents(int64(usage))))
	}
	if len(inv.Summary) > 0 {
		d.Notes = append(d.Notes, summaryNote(inv.Summary[0].MethodVersion))
	}
	if inv.AmountDue > 0 {
		d.Notes = append(d.Notes, "The amount due is what the prepaid balance is overdrawn by at the period's end.")
	}
	if inv.ReplacesInvoiceID != "" {
		d.Notes = append(d.Notes, fmt.Sprintf("This invoice replaces invoice %s of the same period, which was voided.",
			displayNumber(inv.ReplacesNumber)))
	}
	if inv.Status == StatusVoid {
		d.Notes = append(d.Notes, voidNote("invoice", inv.VoidedAt, inv.VoidReason)+creditNotesNote(inv.CreditNotes))
	}
	return checked(d, "invoice", inv.ID)
}

// invoiceLine is an invoice's line on its document: usage and late usage with their tokens and
// unit prices, a credit by a credit note as an adjustment in the customer's favour.
func invoiceLine(l InvoiceLine) documents.Line {
	out := documents.Line{Kind: documents.LineAdjustment, Description: l.Description, Amount: documents.Cents(l.Amount),
		Exact: exact(l.Charge)}
	switch l.Kind {
	case LineUsage, LineLateUsage:
		out.Kind = documents.LineUsage
		t := &documents.Tokens{Input: l.InputTokens, Output: l.OutputTokens, Unpriced: l.InputPrice == nil,
			CachedInput: l.CachedInputTokens}
		if l.InputPrice != nil {
			t.InputPrice, t.OutputPrice = *l.InputPrice, *l.OutputPrice
			if l.CachedInputPrice != nil {
				t.CachedInputPrice = *l.CachedInputPrice
			}
		}
		out.Tokens = t
		if l.Kind == LineLateUsage {
			out.Kind = documents.LineLateUsage
			p := documentPeriod(l.UsagePeriod)
			out.ForPeriod = &p
		}
	}
	return out
}

// entryDescription names a movement of the prepaid balance by its kind and date.
func entryDescription(e LedgerEntry) string {
	day := e.OccurredAt.UTC().Format(time.DateOnly)
	switch e.Kind {
	case "purchase":
		return "Credits bought on " + day
	case "refund":
		return "Credits refunded on " + day
	case "adjustment":
		return "Adjustment by finance on " + day
	case "credit_note":
		return "Credit note credited on " + day
	}
	return strings.ReplaceAll(e.Kind, "_", " ") + " on " + day
}

// CreditNoteDocument is the credit note as a document: the voided invoice's lines and total,
// what it credits back to the customer as the amount due to the buyer, and in its notes the
// invoice it cancels and why.
func CreditNoteDocument(cn CreditNote) (documents.Document, error) {
	d := documents.Document{
		Kind: documents.KindCreditNote, Number: cn.Number, Status: documents.StatusIssued, IssueDate: cn.IssuedAt,
		Period: documentPeriod(cn.Period), Currency: currencyCode(cn.Currency),
		Seller: documentParty(cn.Seller, ""), Buyer: documentParty(cn.Buyer, cn.PONumber),
	}
	for _, l := range cn.Lines {
		d.Lines = append(d.Lines, invoiceLine(l))
	}
	credited, err := CentsOf(cn.Credited)
	if err != nil {
		return documents.Document{}, err
	}
	d.Totals = documents.Totals{Subtotal: documents.Cents(cn.Amount), Total: documents.Cents(cn.Amount),
		AmountDue: documents.Cents(credited)}
	reason := "Reason: " + cn.ReasonText + "."
	if note := oneLine(cn.Note); note != "" {
		reason += " " + note
	}
	d.Notes = append(d.Notes,
		fmt.Sprintf("This credit note cancels invoice %s of %s in full.", displayNumber(cn.InvoiceNumber), cn.Period.Label()),
		reason)
	if cn.Credited.Sign() != 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%s is credited back to the buyer's prepaid balance.", credited))
	} else {
		d.Notes = append(d.Notes, "No money moves: a regenerated invoice of the same period replaces the one cancelled.")
	}
	d.Notes = append(d.Notes, roundingNote)
	return checked(d, "credit note", cn.ID)
}

// StatementDocument is the provider's statement as a document: the provider sells its serving
// and the platform buys it. Its lines are the statement's, at the provider's asks, with a
// clawback as an adjustment against the provider, and, when the provider's previous statement
// carried something over, that carry-over as an adjustment, so that the total is the
// statement's net; the amount due to the provider is its payout.
func StatementDocument(st Statement) (documents.Document, error) {
	d := documents.Document{
		Kind: documents.KindStatement, Number: st.Number, Status: documentStatus(st.Status),
		IssueDate: issueDate(st.Status, st.IssuedAt, st.CreatedAt),
		Period:    documentPeriod(st.Period), Currency: currencyCode(st.Currency),
		Seller: documentParty(st.Payee, ""), Buyer: documentParty(st.Payer, ""),
	}
	for _, l := range st.Lines {
		out := documents.Line{Kind: documents.LineAdjustment, Description: l.Description, Amount: documents.Cents(l.Amount),
			Exact: exact(l.Earned)}
		if l.Kind == LineUsage || l.Kind == LineLateUsage {
			out.Kind = documents.LineUsage
			out.Tokens = &documents.Tokens{Input: l.InputTokens, Output: l.OutputTokens, InputPrice: l.AskInput, OutputPrice: l.AskOutput,
				CachedInput: l.CachedInputTokens, CachedInputPrice: l.AskCachedInput}
			if l.Kind == LineLateUsage {
				out.Kind = documents.LineLateUsage
				p := documentPeriod(l.UsagePeriod)
				out.ForPeriod = &p
			}
		}
		d.Lines = append(d.Lines, out)
	}
	if st.CarriedIn != 0 {
		d.Lines = append(d.Lines, documents.Line{Kind: documents.LineAdjustment,
			Description: "Carried over from the provider's previous statement", Amount: documents.Cents(st.CarriedIn)})
	}
	d.Totals = documents.Totals{Subtotal: documents.Cents(st.Net), Total: documents.Cents(st.Net), AmountDue: documents.Cents(st.Payout)}
	d.Notes = append(d.Notes, roundingNote)
	switch {
	case st.CarriedOut < 0:
		d.Notes = append(d.Notes, fmt.Sprintf("The net is %s, below zero: it is carried over and set against the provider's next statements.",
			st.CarriedOut))
	case st.CarriedOut > 0:
		d.Notes = append(d.Notes, fmt.Sprintf("The net of %s is below the minimum payout of %s: it is carried over to the provider's next statement.",
			st.CarriedOut, st.MinimumPayout))
	case st.Payout > 0:
		d.Notes = append(d.Notes, fmt.Sprintf("The net of %s is paid out to the provider.", st.Payout))
	}
	if st.Status == StatusVoid {
		d.Notes = append(d.Notes, voidNote("statement", st.VoidedAt, st.VoidReason)+" A regenerated statement of the same period replaces it.")
	}
	return checked(d, "statement", st.ID)
}

// checked returns the document once package documents accepts it. Every document stored was
// validated as it was written, so one that is refused here is a fault of the platform, not of
// the person asking for it: the refusal is an internal error, with the fields at fault.
func checked(d documents.Document, kind, id string) (documents.Document, error) {
	if err := d.Validate(); err != nil {
		return documents.Document{}, fmt.Errorf("invoicing: the %s %s cannot be printed: %v", kind, id, err)
	}
	return d, nil
}

func documentStatus(s Status) documents.Status {
	switch s {
	case StatusDraft:
		return documents.StatusDraft
	case StatusIssued:
		return documents.StatusIssued
	case StatusPaid:
		return documents.StatusPaid
	case StatusVoid:
		return documents.StatusVoid
	}
	return documents.Status(s)
}

// issueDate is the date a document bears: the day it was issued, or a draft's creation day.
func issueDate(s Status, issuedAt *time.Time, createdAt time.Time) time.Time {
	if s != StatusDraft && issuedAt != nil {
		return issuedAt.UTC()
	}
	return createdAt.UTC()
}

// currencyCode is a stored currency ("usd") as documents write it, an ISO 4217 code ("USD").
func currencyCode(c string) string { return strings.ToUpper(c) }

func documentPeriod(p Period) documents.Period {
	return documents.Month(p.Start().Year(), p.Start().Month())
}

// documentParty is a party as documents print it: its address a line per line, at most
// documents.MaxAddressRows (further lines are joined onto the last), its country by name.
func documentParty(p Party, po string) documents.Party {
	var lines []string
	for _, l := range strings.Split(p.Address, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > documents.MaxAddressRows {
		last := documents.MaxAddressRows - 1
		lines = append(lines[:last], strings.Join(lines[last:], ", "))
	}
	country := p.CountryName
	if country == "" {
		country = p.Country
	}
	return documents.Party{LegalName: p.LegalName, Address: lines, Country: country, VATID: p.VATID, PONumber: po}
}

// voidNote says when and why a document was voided.
func voidNote(kind string, at *time.Time, reason VoidReason) string {
	when := ""
	if at != nil {
		when = " on " + at.UTC().Format(time.DateOnly)
	}
	return fmt.Sprintf("This %s was voided%s: %s.", kind, when, strings.ToLower(reason.Text()))
}

func creditNotesNote(cns []CreditNoteSummary) string {
	if len(cns) == 0 {
		return ""
	}
	numbers := make([]string, len(cns))
	for i, c := range cns {
		numbers[i] = c.Number
	}
	return " Credit note " + strings.Join(numbers, ", ") + " cancels it."
}

// oneLine writes text that a person may have written over several lines as one line, as a
// document's note prints it.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func exact(p money.BigPico) *money.BigPico { return &p }
