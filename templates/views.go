// Package templates renders the platform's pages with templ. Components take view models
// declared here: plain, preformatted values that handlers fill from the services, so that
// templates depend on no domain package.
package templates

// Page is what every page's layout needs.
type Page struct {
	Title string
	CSRF  string
	User  *User // nil when nobody is logged in
	Path  string
	Flash string
	// TestMode says payments run on the local test page (GPUMARKET_PAYMENTS=test): every page
	// shows a banner.
	TestMode bool
	// MayView says whether the reader may open the page at a path, in the account in use, by the
	// access table (core.MayView): the navigation links only those pages. Nil links only the
	// public pages.
	MayView func(path string) bool
	// Refresh, when above zero, reloads the page after that many seconds when scripts do not
	// run: a page that shows work under way (a close, a batch) follows it without a script.
	// With scripts, its progress blocks update in place instead (ProgressBlock).
	Refresh int
}

// User is the logged-in user as the layout shows it: Role is its role in the account in use
// (developer or provider by the account's kind, or the platform's finance or admin), Member its
// member role there, and Accounts every account it may switch to.
type User struct {
	Email       string
	Role        string
	AccountID   string
	AccountName string
	Member      string
	Accounts    []AccountChoice
	// EmailVerified says the user proved Email; until then every page shows a banner.
	EmailVerified bool
}

// AccountChoice is one of the login's accounts in the header's account menu.
type AccountChoice struct {
	ID      string
	Name    string
	Kind    string // customer or provider
	Member  string // the login's role in it
	Current bool
}

// Is reports whether the user has one of the roles.
func (u *User) Is(roles ...string) bool {
	if u == nil {
		return false
	}
	for _, r := range roles {
		if u.Role == r {
			return true
		}
	}
	return false
}

// Option is one choice of a select.
type Option struct {
	Value string
	Label string
}

// Form carries a form's submitted values and its per-field errors.
type Form struct {
	Values map[string]string
	Errors map[string]string
	Error  string // a message about the whole form
}

// Get returns the submitted value of a field.
func (f Form) Get(name string) string { return f.Values[name] }

// Err returns the error for a field, "" when there is none.
func (f Form) Err(name string) string { return f.Errors[name] }

// TierSection is one tier's block in the catalog.
type TierSection struct {
	Tier        string
	Promise     string
	InputPrice  string // per million input tokens: the tier's default
	OutputPrice string // per million output tokens: the tier's default
	// ModelPrices are the models with a price of their own in the tier, in force now, by name.
	ModelPrices []ModelPrice
	Offerings   []OfferingRow
	Count       string // "1 offering", "3 offerings"
}

// ModelPrice is a model's own price in a tier, per million input and output tokens.
type ModelPrice struct {
	Model       string
	InputPrice  string
	OutputPrice string
}

// OfferingRow is an offering as the catalog and the provider portal show it.
type OfferingRow struct {
	ID           string
	Provider     string
	Hardware     string // "4x NVIDIA GeForce RTX 4090"
	Memory       string // "96 GB"
	Model        string
	Region       string
	SitePUE      string // "home, PUE default 1.0", "data centre, PUE 1.12 stated"
	AskInput     string // provider ask per million input tokens
	AskOutput    string // per million output tokens
	TTFTP99      string
	TokensPerSec string
	Basis        string // "claimed" or "measured over N requests"
	Reported     string // the rig's own figures, "P99 20.0 ms, 4000 tokens/s over 150 requests", or "—"
	EnergyKWh    string // per million tokens, estimate
	CarbonG      string // gCO2e per million tokens, estimate
	Tier         string
	Status       string
	// For the offering's provider only: where its rig stands with the platform (pending, active, offline), why
	// in words ("Pending: 2 of 3 probes passed"), and what its last probe measured while it is not active.
	RigState, RigReason, RigProbe string
	// APIs says how the Messages and Responses APIs reach the rig (catalog.Offering.APIsServed); "" when untold.
	APIs string
	// APIsBrief says it in a few words, for the rigs table (catalog.Offering.APIsServedBrief).
	APIsBrief string
	// For the offering's provider only: why it is neither listed nor routed, and how its rig's own figures
	// disagree with the gateway's; "" when neither.
	NotRouted  string
	Divergence string
	// Reliability is the offering's reliability record, shown in the public catalog.
	Reliability ReliabilityCell
	// Benchmark is the benchmark its provider attached; nil when none.
	Benchmark *ProviderBenchmark
}

// CatalogFilters are the catalog's filter values and choices.
type CatalogFilters struct {
	Tier, Model, Region, MaxPrice, MaxP99, Sort string
	Models                                      []Option
	Regions                                     []Option
	Errors                                      map[string]string
}

// CatalogPage is the public catalog.
type CatalogPage struct {
	Page
	Filters  CatalogFilters
	Sections []TierSection
	Count    int
}

// CalculatorResult is the calculator's answer.
type CalculatorResult struct {
	USDPerMTok string // three decimals
	Exact      string // unrounded
	EnergyKWh  string
	CarbonG    string
	Cheapest   *OfferingRow
	P99Target  string
}

// CalculatorPage is the public cost calculator.
type CalculatorPage struct {
	Page
	Form    Form
	GPUs    []Option
	Regions []Option
	Result  *CalculatorResult
}

// AuthPage is the login or sign-up page.
type AuthPage struct {
	Page
	Form Form
	Next string
}

// ListingPage is the provider's form to list or edit a rig.
type ListingPage struct {
	Page
	Form    Form
	GPUs    []Option
	Regions []Option
	Sites   []Option
	PUEHint string // what an empty PUE means: "default 1.0 (home)" or "default 1.3 (data centre)"
	EditID  string // empty when listing a new rig
}

// RigsPage is the provider's list of rigs.
type RigsPage struct {
	Page
	Rigs []OfferingRow
}

// UsersPage is the admin's list of users, with role changes.
type UsersPage struct {
	Page
	Users []UserRow
	Roles []string
}

// UserRow is a user on the admin page.
type UserRow struct {
	ID, Email, Role, AccountID, Created string
	// Account is the name of the user's own account.
	Account string
}

// HomePage is the landing page.
type HomePage struct {
	Page
	Sections []TierSection
}

// ErrorPage tells a user what went wrong.
type ErrorPage struct {
	Page
	Status  int
	Message string
}

// CreditsPage is a developer's balance, purchases and history.
type CreditsPage struct {
	Page
	Balance   string // "$20.00"
	Negative  bool
	Form      Form
	Purchases []PurchaseRow
	History   []HistoryRow
	NextPage  string // link to older history, "" on the last page
	TestMode  bool   // payments go to the local test-payment page
	// Topup is the auto top-up section; nil where auto top-up does not run.
	Topup *TopupView
}

// TopupView is a developer's auto top-up: the saved card and "when the balance falls below,
// add".
type TopupView struct {
	Card    string // "visa ending 4242"; "" when no card is saved
	Enabled bool
	// Stopped says why auto top-up turned itself off; Pending is the charge waiting for the
	// payment provider's word.
	Stopped, StoppedAt string
	Pending            string
	Form               Form // topup_threshold_usd, topup_amount_usd, topup_enabled
	Attempts           []TopupAttemptRow
}

// TopupAttemptRow is one auto top-up charge.
type TopupAttemptRow struct {
	When, Amount, Status string
}

// PurchaseRow is a purchase of credits.
type PurchaseRow struct {
	ID, Amount, Status, Created string
}

// HistoryRow is a movement of credit.
type HistoryRow struct {
	When, Kind, Memo, Amount string
	Negative                 bool
}

// PurchaseReturnPage is where a buyer lands back from the payment page.
type PurchaseReturnPage struct {
	Page
	PurchaseID string
	Amount     string
	Status     string // pending, awaiting_payment, paid, failed
	Balance    string
}

// TestPaymentPage stands in for Stripe's hosted page when no Stripe key is configured.
type TestPaymentPage struct {
	Page
	PurchaseID string
	SessionID  string
	Amount     string
	CancelURL  string
}

// RigConnectPage tells a provider how to download and run gpuagent for one of its rigs.
type RigConnectPage struct {
	Page
	Rig     OfferingRow
	NATSURL string // the rigs' entry point
	// NATSLoopback says the entry point is a loopback address, which no other machine reaches.
	NATSLoopback bool
	// DownloadBase is where rigs download the agent (the platform's public URL); DownloadLoopback says it is a
	// loopback address.
	DownloadBase     string
	DownloadLoopback bool
	// Agents is the command for each architecture the agent is published for, the most common first.
	Agents []AgentDownload
	// ServiceCommand installs the agent and its systemd unit, a template, and starts the listing's instance of it,
	// ServiceName, which reads the environment file EnvFile at EnvPath.
	ServiceCommand string
	ServiceName    string
	EnvFile        string // the same configuration as the command, for the unit's instance
	EnvPath        string
	UnitURL        string // where the systemd unit is downloaded
	UnitName       string // its file name under /etc/systemd/system
	Unit           string // the unit itself
	// Reissuable offers a form that re-issues the rig's credential.
	Reissuable bool
}

// AgentDownload is the Connect page's command for one architecture.
type AgentDownload struct {
	Arch    string // as Go names it: amd64, arm64
	Machine string // as `uname -m` names it: x86_64, aarch64
	// Available says this server publishes the agent for the architecture: Command downloads, verifies and runs
	// it. Otherwise Command runs an agent built by hand.
	Available bool
	Command   string
}

// RigReportsPage lists, for admins, the rigs whose own figures disagree with the gateway's.
type RigReportsPage struct {
	Page
	Rows []RigReportRow
}

// RigReportRow is one flagged rig.
type RigReportRow struct {
	OfferingID, Offering, Provider, Model, Hardware, Tier, Measured, Reported, Why string
}

// BatchQueuePage is the batch queue for admins.
type BatchQueuePage struct {
	Page
	Batches                        []BatchStatusCount
	Pending, Running, Done, Failed int64
	LinesLastHour                  int64
	PerMinute, Oldest              string
	Offerings                      []BatchOfferingRow
	// Progress is the lines of the batches in progress, done of all, polled while any runs.
	Progress ProgressView
}

// BatchStatusCount is how many open batches have a status.
type BatchStatusCount struct {
	Status string
	Count  int
}

// BatchOfferingRow is an offering serving batch lines now.
type BatchOfferingRow struct {
	OfferingID, Offering, Provider, Model, Tier, Capacity string
	InFlight                                              int
}

// DiscrepanciesPage lists requests whose usage as the gateway saw it differs from what was
// metered.
type DiscrepanciesPage struct {
	Page
	Form Form
	// State is which are shown: "open" (the default) or "resolved"; StateLinks switch between them.
	State      string
	StateLinks []FilterLink
	// CanResolve offers each open discrepancy's form to mark it resolved (an administrator's).
	CanResolve bool
	Rows       []DiscrepancyRow
}

// FilterLink is one choice of a page's filter: its label, where it leads, and whether it is
// the choice shown.
type FilterLink struct {
	Label, Href, TestID string
	Current             bool
}

// DiscrepancyRow is one flagged request: the usage the response carried (Seen), what the rig
// reported, what was billed (Metered), and the excess the rig reported beyond the bill.
type DiscrepancyRow struct {
	Flagged, RequestID, OfferingID, Tier, Model, Seen, Reported, Metered, Excess, Flag, Reason string
	// Offering names the offering (catalog.Label); OfferingID stays in a copyable detail.
	Offering string
	// Resolved says who marked the discrepancy resolved and when, Note what they found; both ""
	// while it is open.
	Resolved, Note string
}

// ProfilePage is the signed-in user's own settings.
type ProfilePage struct {
	Page
	Form  Form
	Email string
	// Zones are suggested beside the time zone field; Now is the present moment in the zone saved.
	Zones []string
	Now   string
}
