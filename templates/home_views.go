package templates

// UserHomePage is the first page after logging in (/home): what the account in use, or the
// platform's role, needs to know and do first. One of Customer and Provider is set for an
// account's member; Finance for the platform's finance, Finance and Admin for its admins.
type UserHomePage struct {
	Page
	// Heading names whose home it is: the account's name, or the platform's role.
	Heading  string
	Customer *CustomerHome
	Provider *ProviderHome
	Finance  *FinanceHome
	Admin    *AdminHome
}

// CustomerHome is a customer's account at a glance.
type CustomerHome struct {
	Balance  string // "$21.60"
	Negative bool
	// SpendThisMonth is this month's spend so far; SpendLastMonth last month's to the same
	// point; SpendSpan says over what time, in UTC.
	SpendThisMonth, SpendLastMonth, SpendSpan string
	// Figures are this month's savings, energy and carbon, each with its method's link.
	Figures []ReportFigure
	// ReportsURL is this month on the reports page.
	ReportsURL string
	Alerts     []HomeAlert
	// Steps are the three steps to a first call; nil once all three are done.
	Steps []HomeStep
	// Curl is the call to paste, at the site's URL with a model on offer; "" when none is.
	Curl string
}

// HomeAlert is something the account should act on.
type HomeAlert struct {
	ID, Text, Link, LinkText string
}

// HomeStep is one of the steps to a first call, ticked when done.
type HomeStep struct {
	ID, Title, Detail string
	Done              bool
	Link, LinkText    string
}

// ProviderHome is a provider's account at a glance.
type ProviderHome struct {
	Rigs []HomeRig
	// Earnings is what its rigs earned this month so far; EarningsSpan over what time, in UTC.
	Earnings, EarningsSpan string
	Payout                 HomePayout
}

// HomeRig is a rig and where it stands: active, pending, paused or offline, and why.
type HomeRig struct {
	ID, Provider, Model, Hardware, State, Reason string
}

// HomePayout is a provider's next payout: its amount and when, or why there is none.
type HomePayout struct {
	Amount, When string
	// None says why no payout is coming ("" when one is): below the minimum, no Stripe account.
	None           string
	Link, LinkText string
}

// HomeTask is a count of work waiting, linking to the page where it is done.
type HomeTask struct {
	ID, Label, Count, Link string
	// Waiting says the count is above zero: the task is shown as work to do.
	Waiting bool
}

// FinanceHome is the platform finance's work to do and the month's close.
type FinanceHome struct {
	Tasks []HomeTask
	// Close is last month's close: its state in words, and the close page.
	ClosePeriod, CloseState, CloseDetail string
}

// AdminHome is what the platform's administrators watch.
type AdminHome struct {
	Tasks []HomeTask
	// Offline are the rigs listed active whose agent went silent.
	Offline []HomeRig
}
