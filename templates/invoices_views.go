package templates

// CustomerInvoicesPage is a customer's invoices and credit notes, newest first.
type CustomerInvoicesPage struct {
	Page
	Documents []CustomerDocumentRow
}

// CustomerDocumentRow is one invoice or credit note of a customer.
type CustomerDocumentRow struct {
	Kind      string // "invoice" or "credit_note"
	KindLabel string // "Invoice", "Credit note"
	ID        string
	Number    string
	Period    string // "November 2026"
	Issued    string // the date of issue, UTC
	Total     string // a credit note's is negative: it takes the invoice back
	AmountDue string // "" for a credit note
	Status    string
	Note      string // what it is in words: what it replaces, what it credits
	URL       string // the print-ready page
	PDFURL    string
	CSVURL    string
}

// ProviderStatementsPage is a provider's statements and how each was paid, newest first.
type ProviderStatementsPage struct {
	Page
	MinimumPayout string
	Statements    []ProviderStatementRow
}

// ProviderStatementRow is one statement of a provider.
type ProviderStatementRow struct {
	ID           string
	Number       string
	Period       string
	Status       string
	Earnings     string // the period's earnings and late earnings of the period before
	CarriedIn    string
	Clawbacks    string
	Held         string // released less held earnings of flagged requests
	Payout       string
	CarriedOut   string
	PayoutStatus string // carried_over, awaiting, pending, paid, failed, void
	PayoutText   string // the payout's status in words
	Transfer     string // the Stripe transfer, once paid
	PayoutError  string // why the last attempt did not pay
	URL          string
	PDFURL       string
}
