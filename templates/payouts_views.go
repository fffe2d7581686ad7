package templates

// ProviderPayoutsPage is a provider's Stripe account and the payouts of its statements.
type ProviderPayoutsPage struct {
	Page
	Account  ConnectedAccountView
	Form     Form // the connect form: the country
	Payouts  []PayoutRow
	TestMode bool // onboarding happens on the local test page
	// Run is the provider's payouts of the latest period, polled while one is pending.
	Run ProgressView
}

// ConnectedAccountView is a provider's Stripe account as its page shows it.
type ConnectedAccountView struct {
	State           string // not_connected, onboarding, complete
	StripeAccountID string
	Email           string
	Country         string
	OnboardedAt     string // "" until complete
	LastError       string // why the last creation failed
}

// PayoutRow is one payout of a statement.
type PayoutRow struct {
	ID, Provider, Statement, StatementID, Period, Amount, Status string
	Attempts                                                     int
	Error, Transfer, Created, Paid                               string
	InDoubt                                                      bool
	CanRetry                                                     bool
}

// TestOnboardingPage stands in for Stripe's hosted onboarding in test mode.
type TestOnboardingPage struct {
	Page
	StripeAccountID string
	Email           string
	Country         string
}

// FinancePayoutsPage lists every provider's payouts for finance, with a retry for those that
// allow one.
type FinancePayoutsPage struct {
	Page
	Status   string   // the filter, "" for all
	Statuses []string // the filter's choices
	Payouts  []PayoutRow
	// Run is every provider's payouts of the latest period, polled while one is pending.
	Run ProgressView
}
