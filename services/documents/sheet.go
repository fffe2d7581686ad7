package documents

import (
	"time"
)

// Sheet is a document laid out as text: every figure, date and label as it is printed. The
// PDF is drawn from it and the print-ready page is filled from it, so the two cannot show
// different figures.
type Sheet struct {
	Title  string // "Invoice", "Credit note", "Provider statement"
	Number string // the document's number, or "DRAFT"
	Status string // "Draft", "Issued", "Paid", "Void"
	// Marker is stamped across a document that must not be mistaken for a final one:
	// "DRAFT" or "VOID"; "" otherwise.
	Marker string
	Facts  []Figure // number, status, dates, period and currency, in order
	Seller PartyBlock
	Buyer  PartyBlock
	// Columns head the lines table: the description, input and output tokens, their prices
	// per million, the amount. A "\n" in a label is where the PDF breaks it; a page shows
	// it as a space.
	Columns [6]string
	// Lines are the lines table: every line but the credits lines, which are printed among
	// the totals with the balance they moved.
	Lines   []SheetLine
	Totals  []TotalRow
	Notes   []string
	Summary []Figure // empty when the document has no summary
	// Charts illustrate the summary, printed under it: each as a picture in the PDF and as
	// its table of numbers on the page and in the PDF. Empty when the document has none.
	Charts []SheetChart
	// Footer names the document on every page ("Invoice GPM-2026-000001 · Seller Ltd"); the
	// PDF adds the page number.
	Footer string
	// Date is the date the document bears, the creation date written into the PDF.
	Date time.Time
}

// PartyBlock is a party as printed: a label, the legal name, then the lines under it.
type PartyBlock struct {
	Label string   // "Seller", "Buyer", ...
	Name  string   // the legal name
	Lines []string // address lines, country, "VAT ID …", "PO number …"
}

// SheetLine is a line of the lines table. Cells a line does not have are "".
type SheetLine struct {
	Description               string
	Detail                    string // under the description: the earlier period of a late-usage line, the cached input
	InputTokens, OutputTokens string
	InputPrice, OutputPrice   string
	Amount                    string
}

// TotalRow is one row under the lines: a label and its amount; Strong rows are the ones a
// reader looks for (the total, the amount due).
type TotalRow struct {
	Label, Value string
	Strong       bool
}

// Sheet validates the document and lays it out.
func (d Document) Sheet() (Sheet, error) {
	if err := d.Validate(); err != nil {
		return Sheet{}, err
	}
	s := Sheet{
		Title:   kindTitles[d.Kind],
		Number:  d.Number,
		Status:  statusTitles[d.Status],
		Notes:   d.Notes,
		Summary: d.Summary,
		Date:    d.IssueDate.UTC(),
		Columns: [6]string{"Description", "Input tokens", "Output tokens", "Input price\nper 1M", "Output price\nper 1M", "Amount"},
	}
	switch d.Status {
	case StatusDraft:
		s.Number, s.Marker = "DRAFT", "DRAFT"
	case StatusVoid:
		s.Marker = "VOID"
	}
	dateLabel := "Issue date"
	if d.Status == StatusDraft {
		dateLabel = "Drawn up"
	}
	s.Facts = []Figure{
		{Label: "Number", Value: s.Number},
		{Label: "Status", Value: s.Status},
		{Label: dateLabel, Value: d.IssueDate.UTC().Format(time.DateOnly)},
		{Label: "Period", Value: d.Period.String()},
	}
	if !d.DueDate.IsZero() {
		s.Facts = append(s.Facts, Figure{Label: "Due date", Value: d.DueDate.UTC().Format(time.DateOnly)})
	}
	s.Facts = append(s.Facts, Figure{Label: "Currency", Value: d.Currency})

	sellerLabel, buyerLabel := "Seller", "Buyer"
	if d.Kind == KindStatement {
		sellerLabel, buyerLabel = "Provider (seller)", "Issued by (buyer)"
		s.Columns[3], s.Columns[4] = "Input ask\nper 1M", "Output ask\nper 1M"
	}
	s.Seller = partyBlock(sellerLabel, d.Seller)
	s.Buyer = partyBlock(buyerLabel, d.Buyer)

	var credits []Line
	for _, l := range d.Lines {
		if l.Kind == LineCredits {
			credits = append(credits, l)
			continue
		}
		s.Lines = append(s.Lines, sheetLine(d.Currency, l))
	}
	s.Totals = totalRows(d.Kind, d.Currency, d.Totals, credits)
	for _, c := range d.Charts {
		s.Charts = append(s.Charts, sheetChart(c))
	}
	s.Footer = s.Title + " " + s.Number + " · " + d.Seller.LegalName
	return s, nil
}

var kindTitles = map[Kind]string{
	KindInvoice:    "Invoice",
	KindCreditNote: "Credit note",
	KindStatement:  "Provider statement",
}

var statusTitles = map[Status]string{
	StatusDraft:  "Draft",
	StatusIssued: "Issued",
	StatusPaid:   "Paid",
	StatusVoid:   "Void",
}

func partyBlock(label string, p Party) PartyBlock {
	b := PartyBlock{Label: label, Name: p.LegalName}
	b.Lines = append(b.Lines, p.Address...)
	if p.Country != "" {
		b.Lines = append(b.Lines, p.Country)
	}
	if p.VATID != "" {
		b.Lines = append(b.Lines, "VAT ID "+p.VATID)
	}
	if p.PONumber != "" {
		b.Lines = append(b.Lines, "PO number "+p.PONumber)
	}
	return b
}

func sheetLine(currency string, l Line) SheetLine {
	out := SheetLine{Description: l.Description, Amount: amountText(currency, l.Amount)}
	if l.Kind == LineLateUsage {
		out.Detail = "Late usage of " + l.ForPeriod.String()
	}
	if t := l.Tokens; t != nil && t.CachedInput != 0 {
		cached := "Of the input, " + countText(t.CachedInput) + " tokens cached"
		if !t.Unpriced {
			cached += ", at " + priceText(currency, t.CachedInputPrice) + " per million"
		}
		if out.Detail != "" {
			out.Detail += " · "
		}
		out.Detail += cached
	}
	if t := l.Tokens; t != nil {
		out.InputTokens, out.OutputTokens = countText(t.Input), countText(t.Output)
		out.InputPrice, out.OutputPrice = priceText(currency, t.InputPrice), priceText(currency, t.OutputPrice)
		if t.Unpriced {
			out.InputPrice, out.OutputPrice = unpriced, unpriced
		}
	}
	return out
}

// unpriced is what a price cell prints for tokens whose prices were not recorded.
const unpriced = "—"

// totalRows are the subtotal and total, then the prepaid balance with the credits that moved
// it, then the amount due.
func totalRows(kind Kind, currency string, t Totals, credits []Line) []TotalRow {
	rows := []TotalRow{
		{Label: "Subtotal", Value: amountText(currency, t.Subtotal)},
		{Label: "Total", Value: amountText(currency, t.Total), Strong: true},
	}
	if b := t.Balance; b != nil {
		rows = append(rows, TotalRow{Label: "Opening balance", Value: amountText(currency, b.Opening)})
		for _, c := range credits {
			rows = append(rows, TotalRow{Label: c.Description, Value: amountText(currency, c.Amount)})
		}
		rows = append(rows, TotalRow{Label: "Closing balance", Value: amountText(currency, b.Closing)})
	}
	due := "Amount due"
	switch kind {
	case KindCreditNote:
		due = "Amount due to the buyer"
	case KindStatement:
		due = "Amount due to the provider"
	}
	return append(rows, TotalRow{Label: due, Value: amountText(currency, t.AmountDue), Strong: true})
}
