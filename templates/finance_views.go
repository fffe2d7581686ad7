package templates

// BalancesPage is finance's view of every ledger account, with the form for a manual
// adjustment of a customer's credit.
type BalancesPage struct {
	Page
	Accounts  []AccountBalanceRow
	Customers []Option // the accounts an adjustment may name
	Form      Form
}

// AccountBalanceRow is one ledger account and its balance.
type AccountBalanceRow struct {
	Account  string // the ledger account id
	Kind     string // "customer credit", "provider payable", ...
	Owner    string // the owning organisation; the platform for its own accounts
	Balance  string // exact, "$12.000000149"
	Negative bool   // a customer's credit below zero: flagged for review
}

// PricesPage is the price book: what is in force, its history, and the form to schedule a
// change.
type PricesPage struct {
	Page
	Current []PriceRow
	History []PriceChangeRow
	Tiers   []Option
	Form    Form
}

// PriceRow is a price in force: a tier's default, or a model's own price in the tier.
type PriceRow struct {
	Tier, Input, Output, EffectiveFrom string
	Model                              string // "" for the tier's default
	CachedInput                        string
}

// PriceChangeRow is one row of the price book's history.
type PriceChangeRow struct {
	Tier, Input, Output, EffectiveFrom string
	Model                              string // "" for the tier's default
	CachedInput                        string
	ScheduledBy, ScheduledAt           string
	Status                             string // scheduled, in force, superseded
}

// StripeEventsPage lists the Stripe events received, for audit.
type StripeEventsPage struct {
	Page
	Limit  int // how many of the latest events the page shows at most
	Events []StripeEventRow
}

// StripeEventRow is one Stripe event as received.
type StripeEventRow struct {
	ID, Type, Outcome           string
	Deliveries                  int
	FirstReceived, LastReceived string
}

// RejectionsPage lists usage events the meter refused, for review: the counts per reason and
// per rig, and the samples kept whole.
type RejectionsPage struct {
	Page
	Reason string // the filter, "" for all
	Counts []Option
	Rigs   []RigRejectionRow
	Events []RejectionRow
}

// RigRejectionRow is how many events one rig had refused for one reason.
type RigRejectionRow struct {
	Provider, ProviderID, OfferingID, Reason, Count, Samples, Last string
	// Offering names the offering (catalog.Label), "" for one the catalog does not have.
	Offering string
}

// RejectionRow is one refused usage event.
type RejectionRow struct {
	Seq, Received, Subject, EventID, Reason, Detail, Raw string
}
