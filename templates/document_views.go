package templates

// DocumentPage is the print-ready page of an invoice, a credit note or a provider statement:
// every figure and label already written as the PDF prints it.
type DocumentPage struct {
	Title  string // "Invoice"
	Number string // the number, or "DRAFT"
	Status string // "Draft", "Issued", "Paid", "Void"
	Marker string // "DRAFT" or "VOID" across the page; "" for none
	Facts  []Fact // number, status, dates, period, currency
	Seller DocumentParty
	Buyer  DocumentParty
	// Columns head the lines table: description, input tokens, output tokens, input price,
	// output price, amount.
	Columns [6]string
	Lines   []DocumentLine
	Totals  []DocumentTotal
	Notes   []string
	Summary []Fact // shown only when it has figures
	Charts  []ChartView
	Footer  string
	// Links of the toolbar, hidden in print; "" leaves a link out.
	BackURL, PDFURL, CSVURL string
}

// Fact is a labelled value.
type Fact struct {
	Label, Value string
}

// DocumentParty is the seller or the buyer as the document prints it.
type DocumentParty struct {
	Label, Name string
	Lines       []string
}

// DocumentLine is a row of the lines table; cells a line has not are "".
type DocumentLine struct {
	Description, Detail       string
	InputTokens, OutputTokens string
	InputPrice, OutputPrice   string
	Amount                    string
}

// DocumentTotal is a row under the lines; Strong rows are the total and the amount due.
type DocumentTotal struct {
	Label, Value string
	Strong       bool
}
