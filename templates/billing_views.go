package templates

// BillingDetailsPage is the form of an account's billing details, beside the platform's own as
// its documents name it.
type BillingDetailsPage struct {
	Page
	Form Form // legal_name, address, country, vat_id, po_number
	// Set is false while the account has given none: documents then name the account.
	Set bool
	// Provider says the details are a provider's, for its statements: they carry no PO number.
	Provider bool
	Updated  string // when they were last saved, UTC
	Seller   PartyView
}

// PartyView is one side of a document as a page shows it.
type PartyView struct {
	Name    string
	Address []string // its lines
	Country string   // "Ireland (IE)"
	VATID   string
}
