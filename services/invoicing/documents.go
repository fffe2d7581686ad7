package invoicing

import (
	"time"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
)

// The documents as pages, APIs and printed documents render them. Amounts on lines and totals
// are Cents; exact sums (a line's charge, the ledger's balances) are money.BigPico.

// Invoice is a customer's invoice for a period.
type Invoice struct {
	ID          string `json:"id"`
	AccountID   string `json:"account_id"`
	AccountName string `json:"account_name"`
	Period      Period `json:"period"`
	Status      Status `json:"status"`
	// Number is the legal number, "" for a draft; DisplayNumber is what to print: the number,
	// or "DRAFT".
	Number        string `json:"number"`
	DisplayNumber string `json:"display_number"`
	// ReplacesInvoiceID names the voided invoice this one was regenerated from;
	// ReplacedByInvoiceID the one regenerated from this one when it was voided.
	ReplacesInvoiceID   string `json:"replaces_invoice_id,omitempty"`
	ReplacesNumber      string `json:"replaces_number,omitempty"` // the voided invoice's number
	ReplacedByInvoiceID string `json:"replaced_by_invoice_id,omitempty"`
	Currency            string `json:"currency"`

	Lines []InvoiceLine `json:"lines"`
	// Total is the sum of the lines' amounts. AmountDue is what the customer owes at the
	// period's end: zero when prepaid credit covered the period, the overdraft otherwise.
	Total     Cents `json:"total_cents"`
	AmountDue Cents `json:"amount_due_cents"`
	// Balance is the customer's prepaid credit over the period by ledger time, exact.
	Balance BalanceSummary `json:"balance"`
	// Entries are the period's credits bought, refunds, adjustments and credit notes.
	Entries []LedgerEntry `json:"ledger_entries"`

	PONumber string `json:"po_number,omitempty"`
	Buyer    Party  `json:"buyer"`  // the customer's current details on a draft, those it was issued with after
	Seller   Party  `json:"seller"` // likewise the platform's
	Flags    []Flag `json:"flags"`
	// FlagNotes say what each flag is about, and how much, in the order of Flags.
	FlagNotes []string `json:"flag_notes"`
	// Actions are what finance may do with it now; the service refuses any other.
	Actions     []Action            `json:"actions"`
	CreditNotes []CreditNoteSummary `json:"credit_notes"`
	// Summary is the period's savings and carbon per tier, as stored with the invoice
	// (docs/methodology.md); none on an invoice computed before summaries were kept.
	Summary []reports.TierSummary `json:"summary"`

	ComputedAt       time.Time  `json:"computed_at"` // when its figures were last computed
	CreatedAt        time.Time  `json:"created_at"`
	IssuedAt         *time.Time `json:"issued_at,omitempty"`
	IssuedBy         string     `json:"issued_by,omitempty"` // the approver's email
	PaidAt           *time.Time `json:"paid_at,omitempty"`
	PaidBy           string     `json:"paid_by,omitempty"`
	PaymentReference string     `json:"payment_reference,omitempty"`
	VoidedAt         *time.Time `json:"voided_at,omitempty"`
	VoidedBy         string     `json:"voided_by,omitempty"`
	VoidReason       VoidReason `json:"void_reason,omitempty"`
	VoidNote         string     `json:"void_note,omitempty"`
}

// InvoiceLine is a line of an invoice.
type InvoiceLine struct {
	No   int      `json:"line"`
	Kind LineKind `json:"kind"`
	// UsagePeriod is the period of the usage the line bills: the invoice's own for a usage
	// line, the earlier one a late-usage line names; none for a credit.
	UsagePeriod Period `json:"usage_period"`
	Tier        string `json:"tier,omitempty"`
	Model       string `json:"model,omitempty"`
	// PriceID is the price book's row the usage was sold at (0 where it was not recorded);
	// InputPrice and OutputPrice its unit prices per million tokens, nil where unknown.
	PriceID     int64           `json:"price_id,omitempty"`
	InputPrice  *money.MicroUSD `json:"input_usd_per_mtok,omitempty"`
	OutputPrice *money.MicroUSD `json:"output_usd_per_mtok,omitempty"`
	PriceFrom   *time.Time      `json:"price_effective_from,omitempty"`
	// ModelPrice says the row is the model's own price in the tier, not the tier's default.
	ModelPrice   bool  `json:"model_price,omitempty"`
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// Requests that produced no output token are charged nothing; their tokens are counted
	// above and again here. The line's charge is exactly its charged input tokens that were not
	// cached (ChargedUncachedInputTokens) at InputPrice, its charged cached input tokens
	// (ChargedCachedInputTokens) at CachedInputPrice, and (OutputTokens - UnchargedOutputTokens)
	// at OutputPrice.
	UnchargedRequests     int64 `json:"uncharged_requests"`
	UnchargedInputTokens  int64 `json:"uncharged_input_tokens"`
	UnchargedOutputTokens int64 `json:"uncharged_output_tokens"`
	// CachedInputTokens are the input tokens the engine served from its prompt cache, a part of
	// InputTokens, billed at CachedInputPrice (nil where the price is unknown);
	// UnchargedCachedInputTokens those of them that requests charged nothing held.
	CachedInputPrice           *money.MicroUSD `json:"cached_input_usd_per_mtok,omitempty"`
	CachedInputTokens          int64           `json:"cached_input_tokens"`
	UnchargedCachedInputTokens int64           `json:"uncharged_cached_input_tokens"`
	Charge                     money.BigPico   `json:"charge_pico"` // exact; Amount is it rounded to the cent
	Amount                     Cents           `json:"amount_cents"`
	Description                string          `json:"description"`
	CreditNoteID               string          `json:"credit_note_id,omitempty"`
	// payable is what the line's usage owes its providers (for a credit, what the credit note
	// took back, negative): kept with the line, never shown to the customer.
	payable money.BigPico
}

// ChargedInputTokens are the input tokens the line charges for, cached or not.
func (l InvoiceLine) ChargedInputTokens() int64 { return l.InputTokens - l.UnchargedInputTokens }

// ChargedCachedInputTokens are the cached input tokens the line charges for, at CachedInputPrice.
func (l InvoiceLine) ChargedCachedInputTokens() int64 {
	return l.CachedInputTokens - l.UnchargedCachedInputTokens
}

// ChargedUncachedInputTokens are the input tokens the line charges for at InputPrice.
func (l InvoiceLine) ChargedUncachedInputTokens() int64 {
	return l.ChargedInputTokens() - l.ChargedCachedInputTokens()
}

// ChargedOutputTokens are the output tokens the line charges for.
func (l InvoiceLine) ChargedOutputTokens() int64 { return l.OutputTokens - l.UnchargedOutputTokens }

// BalanceSummary is a prepaid credit over a period by ledger time: the sum of the postings of
// transactions that occurred before its start (Opening) and before its end (Closing), and
// between them what moved it, signed as posted (refunds and usage are negative). Closing is
// Opening plus the movements, exactly.
type BalanceSummary struct {
	Opening      money.BigPico `json:"opening_pico"`
	Purchases    money.BigPico `json:"purchases_pico"`
	Refunds      money.BigPico `json:"refunds_pico"`
	Adjustments  money.BigPico `json:"adjustments_pico"`
	CreditNotes  money.BigPico `json:"credit_notes_pico"`
	UsageCharged money.BigPico `json:"usage_charged_pico"`
	Closing      money.BigPico `json:"closing_pico"`
}

// LedgerEntry is one ledger transaction of a document's period that it lists.
type LedgerEntry struct {
	TransactionID string        `json:"transaction_id"`
	Kind          string        `json:"kind"` // purchase, refund, adjustment, credit_note, payout
	Memo          string        `json:"memo"`
	OccurredAt    time.Time     `json:"occurred_at"`
	Amount        money.BigPico `json:"amount_pico"`
}

// CreditNoteSummary names a credit note issued against an invoice.
type CreditNoteSummary struct {
	ID            string        `json:"id"`
	Number        string        `json:"number"`
	InvoiceID     string        `json:"invoice_id"`
	InvoiceNumber string        `json:"invoice_number"`
	Period        Period        `json:"period"`
	Reason        VoidReason    `json:"reason"`
	Amount        Cents         `json:"amount_cents"`
	Credited      money.BigPico `json:"credited_pico"`
	IssuedAt      time.Time     `json:"issued_at"`
}

// CreditNote cancels a voided invoice. Its lines are the voided invoice's; its amount is that
// invoice's total. Credited is what it put back on the customer's prepaid credit (zero for a
// reason that moves no money), Clawbacks what it took back from each provider.
type CreditNote struct {
	ID                   string        `json:"id"`
	Number               string        `json:"number"`
	InvoiceID            string        `json:"invoice_id"`
	InvoiceNumber        string        `json:"invoice_number"`
	AccountID            string        `json:"account_id"`
	AccountName          string        `json:"account_name"`
	Period               Period        `json:"period"`
	Currency             string        `json:"currency"` // the invoice's
	Reason               VoidReason    `json:"reason"`
	ReasonText           string        `json:"reason_text"`
	Note                 string        `json:"note,omitempty"`
	Amount               Cents         `json:"amount_cents"`
	Credited             money.BigPico `json:"credited_pico"`
	LedgerTransactionID  string        `json:"ledger_transaction_id,omitempty"`
	RegeneratedInvoiceID string        `json:"regenerated_invoice_id"`
	Clawbacks            []Clawback    `json:"clawbacks"`
	Lines                []InvoiceLine `json:"lines"`
	PONumber             string        `json:"po_number,omitempty"`
	Buyer                Party         `json:"buyer"`
	Seller               Party         `json:"seller"`
	IssuedAt             time.Time     `json:"issued_at"`
	IssuedBy             string        `json:"issued_by"`
}

// Clawback is what a credit note took back from one provider.
type Clawback struct {
	ProviderAccountID string        `json:"provider_account_id"`
	ProviderName      string        `json:"provider_name"`
	Amount            money.BigPico `json:"amount_pico"`
}

// Statement is a provider's statement for a period.
type Statement struct {
	ID                  string `json:"id"`
	ProviderAccountID   string `json:"provider_account_id"`
	ProviderName        string `json:"provider_name"`
	Period              Period `json:"period"`
	Status              Status `json:"status"`
	Number              string `json:"number"`
	DisplayNumber       string `json:"display_number"`
	ReplacesStatementID string `json:"replaces_statement_id,omitempty"`
	Currency            string `json:"currency"`

	Lines []StatementLine `json:"lines"`
	// Earnings is the sum of the period's usage lines, LateEarnings of the late-usage lines,
	// Clawbacks (negative) of what credit notes took back in the period. CarriedIn is what the
	// provider's previous statement carried over (under the minimum payout, or negative). Net is
	// their sum; a Net of at least MinimumPayout is paid out (Payout), less is CarriedOut.
	Earnings     Cents `json:"earnings_cents"`
	LateEarnings Cents `json:"late_earnings_cents"`
	Clawbacks    Cents `json:"clawbacks_cents"`
	CarriedIn    Cents `json:"carried_in_cents"`
	Net          Cents `json:"net_cents"`
	// Held is the statement's held and released lines (docs/invoicing.md, "Flags and held
	// earnings"): released less held, part of Net.
	Held          Cents `json:"held_cents"`
	Payout        Cents `json:"payout_cents"`
	CarriedOut    Cents `json:"carried_out_cents"`
	MinimumPayout Cents `json:"minimum_payout_cents"`
	// Total is the statement's total as its document prints it: its lines and what the
	// previous statement carried in, that is Net.
	Total Cents `json:"total_cents"`
	// CarriedFromStatementID names the statement CarriedIn came from.
	CarriedFromStatementID string `json:"carried_from_statement_id,omitempty"`
	// Payable is the provider's payable over the period by ledger time.
	Payable PayableSummary `json:"payable"`

	Payee     Party    `json:"payee"` // the provider's details
	Payer     Party    `json:"payer"` // the platform's
	Flags     []Flag   `json:"flags"`
	FlagNotes []string `json:"flag_notes"` // what each flag is about, and how much
	Actions   []Action `json:"actions"`

	ComputedAt       time.Time  `json:"computed_at"`
	CreatedAt        time.Time  `json:"created_at"`
	IssuedAt         *time.Time `json:"issued_at,omitempty"`
	IssuedBy         string     `json:"issued_by,omitempty"`
	PaidAt           *time.Time `json:"paid_at,omitempty"`
	PaidBy           string     `json:"paid_by,omitempty"`
	PaymentReference string     `json:"payment_reference,omitempty"`
	VoidedAt         *time.Time `json:"voided_at,omitempty"`
	VoidedBy         string     `json:"voided_by,omitempty"`
	VoidReason       VoidReason `json:"void_reason,omitempty"`
	VoidNote         string     `json:"void_note,omitempty"`
}

// StatementLine is a line of a statement.
type StatementLine struct {
	No          int      `json:"line"`
	Kind        LineKind `json:"kind"`
	UsagePeriod Period   `json:"usage_period"`
	OfferingID  string   `json:"offering_id,omitempty"`
	Model       string   `json:"model,omitempty"`
	// AskInput and AskOutput are what the provider asked per million tokens, fixed per request
	// by its route ticket.
	AskInput              money.MicroUSD `json:"ask_input_usd_per_mtok"`
	AskOutput             money.MicroUSD `json:"ask_output_usd_per_mtok"`
	Requests              int64          `json:"requests"`
	InputTokens           int64          `json:"input_tokens"`
	OutputTokens          int64          `json:"output_tokens"`
	UnchargedRequests     int64          `json:"uncharged_requests"`
	UnchargedInputTokens  int64          `json:"uncharged_input_tokens"`
	UnchargedOutputTokens int64          `json:"uncharged_output_tokens"`
	// AskCachedInput is what the provider is paid per million cached input tokens: its input
	// ask scaled by the price version's cached-to-input ratio (docs/metering-integrity.md).
	AskCachedInput             money.MicroUSD `json:"ask_cached_input_usd_per_mtok"`
	CachedInputTokens          int64          `json:"cached_input_tokens"`
	UnchargedCachedInputTokens int64          `json:"uncharged_cached_input_tokens"`
	Earned                     money.BigPico  `json:"earned_pico"` // exact; negative for a clawback
	Amount                     Cents          `json:"amount_cents"`
	Description                string         `json:"description"`
	TransactionID              string         `json:"transaction_id,omitempty"`
	CreditNoteID               string         `json:"credit_note_id,omitempty"`
}

// PayableSummary is a provider's payable over a period by ledger time, signed as posted: usage
// adds to it, credit notes and payouts take from it.
type PayableSummary struct {
	Opening     money.BigPico `json:"opening_pico"`
	Usage       money.BigPico `json:"usage_pico"`
	CreditNotes money.BigPico `json:"credit_notes_pico"`
	Payouts     money.BigPico `json:"payouts_pico"`
	Other       money.BigPico `json:"other_pico"`
	Closing     money.BigPico `json:"closing_pico"`
}
