package templates

import "slices"

// ReviewQueuePage is finance's review queue of invoices or of statements: the filters, a row
// per document with its flags and the actions it allows, and the approval of many at once.
type ReviewQueuePage struct {
	Page
	Kind    string // "invoices" or "statements": the queue's path under /finance
	Heading string // "Invoices", "Provider statements"
	Filters ReviewFilters
	// TotalLabel and DueLabel head the two amount columns: "Total" and "Amount due" on
	// invoices, "Net" and "Payout" on statements.
	TotalLabel, DueLabel string
	Rows                 []ReviewRow
	// NextURL is the next page of the queue; "" on the last. ApproveURL is where the checked
	// drafts are posted, with the queue's filters, so that the answer is the same queue.
	NextURL, ApproveURL string
	// ApproveLabel is the approval's button: what it does, confirmed on the next page.
	ApproveLabel string
	// Results are the outcomes of an approval of many, one per document, when the page
	// answers one.
	Results []ApprovalResult
	// JournalURL is the month's journal (CSV) for the filtered period, or the last closed one.
	JournalURL, JournalPeriod string
	Form                      Form // the filters' errors
}

// ReviewFilters are a queue's filter values as given, and their choices.
type ReviewFilters struct {
	Period, Status, Party, MinTotal, MaxTotal, Flag string
	PartyLabel                                      string // "Customer" or "Provider"
	Statuses, Flags                                 []Option
}

// ReviewRow is a document in a queue.
type ReviewRow struct {
	ID, URL                       string
	Number, Party, Period, Status string
	Total, Due                    string
	Flags                         []FlagView
	Actions                       []string // what its state allows, in words: "approve", "mark paid", "void"
	Approvable                    bool     // a checkbox selects it for approval
	DocumentURL, PDFURL, Replaces string
	ComputedAt, IssuedAt, Problem string
}

// FlagView is a review flag: its key, what it means, what it is about and how much (Note),
// and the page finance looks into it on (URL).
type FlagView struct {
	Key, Label, Note, URL string
}

// Text is the flag in words: its label, and its note when it has one.
func (f FlagView) Text() string {
	if f.Note == "" {
		return f.Label
	}
	return f.Label + ": " + f.Note
}

// ApprovalResult is the outcome of approving one document: its number, or why not.
type ApprovalResult struct {
	ID, URL, Number, Problem string
	// Name is the document as a person knows it: its party and period.
	Name string
}

// FinanceDocumentPage is one invoice or statement as finance reviews it: its lines, totals,
// flags, the parties' details, its links, its history, and the actions it allows as forms.
type FinanceDocumentPage struct {
	Page
	Kind      string // "invoice" or "statement"
	Title     string // "Invoice", "Provider statement"
	ID, Path  string // Path is the page's own, "/finance/invoices/<id>"
	Number    string // or "DRAFT"
	Status    string
	Period    string
	Party     string // the customer or the provider
	PartyID   string
	PartyRole string // "Customer", "Provider"
	Flags     []FlagView
	Lines     []DocumentDetailLine
	// PriceLabel heads the price columns: "price" on invoices, "ask" on statements.
	PriceLabel string
	Totals     []Fact
	Strong     string // the label of the total row shown in bold
	// Balance is the prepaid balance (an invoice) or the payable (a statement) over the period.
	Balance      []Fact
	BalanceTitle string
	Entries      []EntryRow // an invoice's ledger movements of the period
	Parties      []DocumentParty
	Facts        []Fact // who computed, issued, paid and voided it, and when
	// Links to the printed document and to related documents.
	DocumentURL, PDFURL, CSVURL string
	Related                     []Link
	History                     []AuditRow
	Actions                     DocumentActions
	Form                        Form // the errors of an action's form
}

// DocumentDetailLine is a line as finance reviews it, with its exact amount beside the
// rounded one.
type DocumentDetailLine struct {
	No, Kind, Description     string
	Requests, Uncharged       string
	InputTokens, OutputTokens string
	InputPrice, OutputPrice   string
	Exact, Amount             string
}

// EntryRow is a ledger movement of an invoice's period.
type EntryRow struct {
	At, Kind, Memo, Amount string
}

// Link is a labelled link.
type Link struct {
	Label, URL, TestID string
}

// DocumentActions are the actions a document's state allows, each shown as a form.
type DocumentActions struct {
	Approve, MarkPaid, Void bool
	// ApproveLabel says what approving does: for a statement, the transfer it sends.
	ApproveLabel string
	VoidReasons  []Option
	// VoidPO offers a new PO number for the regenerated invoice (invoices only).
	VoidPO bool
}

// Any reports whether any action is allowed.
func (a DocumentActions) Any() bool { return a.Approve || a.MarkPaid || a.Void }

// AuditPage is the finance audit log with its filters.
type AuditPage struct {
	Page
	Action, Actor, From, To, SubjectKind, SubjectID string
	Actions, Actors                                 []Option
	Rows                                            []AuditRow
	OlderURL                                        string // the next, older page; "" on the last
	Form                                            Form
}

// AuditRow is one entry of the audit log.
type AuditRow struct {
	ID                  string
	At, Actor, Action   string
	Subject, SubjectURL string
	SubjectID           string // a named subject's id, kept in a copyable detail; "" when Subject shows the id
	Summary             string
	Before, After       string // JSON, "" for none
}

// ClosePage is the form that closes a month, the close asked about (its progress, the page
// refreshing itself while it runs), and the periods closed so far.
type ClosePage struct {
	Page
	Form    Form
	Current *CloseView
	// Progress is the current close's accounts done, polled while it runs.
	Progress ProgressView
	Closes   []CloseView
}

// CloseView is a period's close as it stands.
type CloseView struct {
	Period, Status             string
	Running                    bool
	StartedBy, StartedAt       string
	FinishedAt                 string
	Runs                       int
	Customers, Providers       string // "3 of 10"
	Invoices, Statements, Left int
	Problem                    string
	InvoicesURL, StatementsURL string
	URL, JournalURL            string
}

// sortedKeys are a map's keys in order, so that a page lists field errors the same way each time.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// FlagsPage lists the requests flagged with an excess, with the forms that resolve the
// unresolved ones.
type FlagsPage struct {
	Page
	Form       Form
	Period     string
	Account    string // the customer's account id the list is narrowed to, or ""
	Provider   string // likewise the provider's
	Unresolved bool
	Back       string // the page as filtered
	Rows       []FlagRow
}

// FlagRow is a flagged request. Release and ClawBack say what each resolution does, with its
// amounts; both are empty once it is resolved.
type FlagRow struct {
	RequestID, Occurred, Period, Customer, Provider, Model string
	Reported, Billed, Seen, Excess, Reason                 string
	Charged, Earned                                        string
	Resolution, ResolvedAt, ResolvedBy, Note               string
	Release, ClawBack                                      string
}
