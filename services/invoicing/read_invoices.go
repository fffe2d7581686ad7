package invoicing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
)

// Reading invoices and credit notes for pages, APIs and printed documents. Finance reads any
// (Invoice, Invoices); a customer only its own account's, and never a draft (AccountInvoice,
// AccountInvoices): a draft is finance's until it is issued.

var errInvoiceNotFound = services.Errorf(services.CodeNotFound, "No such invoice.")

// InvoiceSummary is an invoice in a list: the review queue, a customer's invoices.
type InvoiceSummary struct {
	ID                string     `json:"id"`
	AccountID         string     `json:"account_id"`
	AccountName       string     `json:"account_name"`
	Period            Period     `json:"period"`
	Status            Status     `json:"status"`
	Number            string     `json:"number"`
	DisplayNumber     string     `json:"display_number"`
	Total             Cents      `json:"total_cents"`
	AmountDue         Cents      `json:"amount_due_cents"`
	Flags             []Flag     `json:"flags"`
	FlagNotes         []string   `json:"flag_notes"` // what each flag is about, and how much
	Actions           []Action   `json:"actions"`
	ReplacesInvoiceID string     `json:"replaces_invoice_id,omitempty"`
	ComputedAt        time.Time  `json:"computed_at"`
	IssuedAt          *time.Time `json:"issued_at,omitempty"`
}

// InvoiceFilter selects invoices for the review queue. Zero values filter nothing.
type InvoiceFilter struct {
	Period    Period
	Status    Status
	AccountID string
	// AccountName selects the accounts whose name holds it, in any case.
	AccountName string
	Flag        Flag
	// MinTotal and MaxTotal bound the total, inclusive.
	MinTotal, MaxTotal *Cents
	// Limit is the most a page holds (0: DefaultListLimit); Offset skips that many.
	Limit, Offset int
}

// List page sizes.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Validate names every bad field.
func (f InvoiceFilter) Validate() error {
	fe := services.FieldErrors{}
	if f.Status != "" && !f.Status.Valid() {
		fe.Add("status", "Choose draft, issued, paid or void.")
	}
	if f.AccountID != "" && !isUUID(f.AccountID) {
		fe.Add("account_id", "Choose an account.")
	}
	checkListFilter(fe, "account_name", f.AccountName, f.Flag, f.MinTotal, f.MaxTotal, f.Limit, f.Offset)
	return fe.Err()
}

// MaxNameFilter bounds a filter on a name.
const MaxNameFilter = 200

// checkListFilter checks what the two review queues' filters share.
func checkListFilter(fe services.FieldErrors, nameField, name string, flag Flag, minTotal, maxTotal *Cents, limit, offset int) {
	if len(name) > MaxNameFilter {
		fe.Add(nameField, fmt.Sprintf("Use at most %d characters.", MaxNameFilter))
	}
	if flag != "" && !flag.Valid() {
		fe.Add("flag", "Choose usage_mismatch, discrepancy, negative_balance or spike.")
	}
	if minTotal != nil && maxTotal != nil && *maxTotal < *minTotal {
		fe.Add("max_total", "Choose a maximum at least the minimum.")
	}
	if limit < 0 || limit > MaxListLimit || offset < 0 {
		fe.Add("limit", fmt.Sprintf("Ask for 1 to %d a page.", MaxListLimit))
	}
}

// InvoicePage is a page of invoices: latest period first, then by account name.
type InvoicePage struct {
	Invoices []InvoiceSummary `json:"invoices"`
	// More is true when a later page has more.
	More bool `json:"more"`
}

const invoiceSummaryColumns = `
	SELECT i.id::text, i.account_id::text, i.period, i.status, coalesce(i.number, ''), i.total_cents,
		i.amount_due_cents, i.flags, coalesce(i.replaces_invoice_id::text, ''), i.computed_at, i.issued_at, i.flag_notes,
		i.created_at
	FROM invoices i`

// listedInvoice is an invoice in a list, with when it was made, which orders invoices of one
// account and period.
type listedInvoice struct {
	InvoiceSummary
	createdAt time.Time
}

func scanInvoiceSummary(r pgx.CollectableRow) (listedInvoice, error) {
	var v listedInvoice
	var period time.Time
	var flags []string
	err := r.Scan(&v.ID, &v.AccountID, &period, &v.Status, &v.Number, &v.Total, &v.AmountDue, &flags,
		&v.ReplacesInvoiceID, &v.ComputedAt, &v.IssuedAt, &v.FlagNotes, &v.createdAt)
	v.Period, v.DisplayNumber, v.Flags = periodOfDate(period), displayNumber(v.Number), flagsOf(flags)
	v.Actions = invoiceActions(v.Status, v.AmountDue)
	v.ComputedAt, v.IssuedAt = v.ComputedAt.UTC(), utcPtr(v.IssuedAt)
	return v, err
}

// readInvoiceSummaries reads the invoices a query of invoiceSummaryColumns selects, each
// named by its account's name (accounts.NamesByID).
func (s *Service) readInvoiceSummaries(ctx context.Context, sql string, args ...any) ([]listedInvoice, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanInvoiceSummary)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, v := range list {
		ids[i] = v.AccountID
	}
	names, err := accounts.NamesByID(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	for i := range list {
		list[i].AccountName = names[list[i].AccountID]
	}
	return list, nil
}

// Invoices lists the invoices that match the filter, for finance.
func (s *Service) Invoices(ctx context.Context, f InvoiceFilter) (_ InvoicePage, err error) {
	defer services.Wrap(&err, "invoicing.Invoices")
	if err := f.Validate(); err != nil {
		return InvoicePage{}, err
	}
	w := where{}
	if !f.Period.IsZero() {
		w.add("i.period = $?", f.Period.Start())
	}
	if f.Status != "" {
		w.add("i.status = $?", string(f.Status))
	}
	if f.AccountID != "" {
		w.add("i.account_id = $?::uuid", f.AccountID)
	}
	if f.AccountName != "" {
		named, err := accounts.IDsNamedLike(ctx, s.pool, f.AccountName)
		if err != nil {
			return InvoicePage{}, err
		}
		w.add("i.account_id = ANY ($?::text[]::uuid[])", named)
	}
	if f.Flag != "" {
		w.add("$? = ANY (i.flags)", string(f.Flag))
	}
	if f.MinTotal != nil {
		w.add("i.total_cents >= $?", int64(*f.MinTotal))
	}
	if f.MaxTotal != nil {
		w.add("i.total_cents <= $?", int64(*f.MaxTotal))
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	w, offset, ok, err := s.pagePeriods(ctx, "invoices i", "i", w, f.Offset, limit)
	if err != nil || !ok {
		return InvoicePage{Invoices: []InvoiceSummary{}}, err
	}
	list, err := s.readInvoiceSummaries(ctx, invoiceSummaryColumns+w.sql(), w.args...)
	if err != nil {
		return InvoicePage{}, err
	}
	// Latest period first, then by account name, then as made: sorted after the names are
	// looked up, and paged then, among the periods the page reaches into.
	slices.SortFunc(list, func(a, b listedInvoice) int {
		return cmp.Or(b.Period.Start().Compare(a.Period.Start()), strings.Compare(a.AccountName, b.AccountName),
			a.createdAt.Compare(b.createdAt), strings.Compare(a.ID, b.ID))
	})
	shown, more := pageOf(list, offset, limit)
	page := InvoicePage{Invoices: make([]InvoiceSummary, len(shown)), More: more}
	for i, v := range shown {
		page.Invoices[i] = v.InvoiceSummary
	}
	return page, nil
}

// pageOf is the page of a sorted list that starts at offset and holds at most limit entries, and whether more
// follow it.
func pageOf[T any](list []T, offset, limit int) (page []T, more bool) {
	list = list[min(max(offset, 0), len(list)):]
	if len(list) > limit {
		return list[:limit], true
	}
	return list, false
}

// AccountInvoices lists an account's issued, paid and void invoices, latest period first, as
// the customer sees them (see docs/invoicing.md, "Customers and providers").
func (s *Service) AccountInvoices(ctx context.Context, accountID string) (_ []InvoiceSummary, err error) {
	defer services.Wrap(&err, "invoicing.AccountInvoices")
	if !isUUID(accountID) {
		return []InvoiceSummary{}, nil
	}
	list, err := s.readInvoiceSummaries(ctx, invoiceSummaryColumns+`
		WHERE i.account_id = $1 AND i.status <> 'draft'
		ORDER BY i.period DESC, i.issued_at DESC`, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]InvoiceSummary, len(list))
	for i, v := range list {
		out[i] = v.InvoiceSummary
		out[i].Flags, out[i].FlagNotes, out[i].Actions = []Flag{}, []string{}, []Action{}
	}
	return out, nil
}

// InvoicesByID returns the summaries of the invoices with these ids, by id, for finance, in one
// query: ids of no invoice are left out.
func (s *Service) InvoicesByID(ctx context.Context, ids []string) (_ map[string]InvoiceSummary, err error) {
	defer services.Wrap(&err, "invoicing.InvoicesByID")
	ids = uuidsOf(ids)
	out := make(map[string]InvoiceSummary, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := s.readInvoiceSummaries(ctx, invoiceSummaryColumns+` WHERE i.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, err
	}
	for _, v := range list {
		out[v.ID] = v.InvoiceSummary
	}
	return out, nil
}

// Invoice returns an invoice with its lines, for finance.
func (s *Service) Invoice(ctx context.Context, id string) (Invoice, error) {
	return s.invoice(ctx, s.pool, id, "", true)
}

// AccountInvoice returns one of the account's invoices that is not a draft, as the customer
// sees it; any other is not found.
func (s *Service) AccountInvoice(ctx context.Context, accountID, id string) (Invoice, error) {
	if !isUUID(accountID) {
		return Invoice{}, errInvoiceNotFound
	}
	v, err := s.invoice(ctx, s.pool, id, accountID, false)
	return v.forCustomer(), err
}

// forCustomer is what a customer sees of its own invoice: the document, without finance's
// review flags, the actions only finance takes (a customer takes none), or the finance users
// who took them.
func (v Invoice) forCustomer() Invoice {
	v.Flags, v.FlagNotes, v.Actions = []Flag{}, []string{}, []Action{}
	v.IssuedBy, v.PaidBy, v.VoidedBy = "", "", ""
	return v
}

func (s *Service) invoice(ctx context.Context, q querier, id, accountID string, drafts bool) (_ Invoice, err error) {
	defer services.Wrap(&err, "invoicing.Invoice(%s)", id)
	if !isUUID(id) {
		return Invoice{}, errInvoiceNotFound
	}
	var v Invoice
	var period time.Time
	var flags []string
	var po pgtype.Text
	var buyer, seller [4]pgtype.Text
	var reason string
	err = q.QueryRow(ctx, `
		SELECT i.id::text, i.account_id::text, i.period, i.status, coalesce(i.number, ''),
			coalesce(i.replaces_invoice_id::text, ''),
			coalesce((SELECT r.number FROM invoices r WHERE r.id = i.replaces_invoice_id), ''),
			coalesce((SELECT r.id::text FROM invoices r WHERE r.replaces_invoice_id = i.id ORDER BY r.created_at LIMIT 1), ''),
			i.currency, i.total_cents, i.amount_due_cents, i.opening_balance_pico, i.purchases_pico, i.refunds_pico,
			i.adjustments_pico, i.credit_notes_pico, i.usage_charged_pico, i.closing_balance_pico, i.po_number,
			i.buyer_legal_name, i.buyer_address, i.buyer_country, i.buyer_vat_id,
			i.seller_name, i.seller_address, i.seller_country, i.seller_vat_id,
			i.flags, i.computed_at, i.created_at, i.issued_at, coalesce(i.issued_by::text, ''), i.paid_at,
			coalesce(i.paid_by::text, ''), coalesce(i.payment_reference, ''), i.voided_at, coalesce(i.voided_by::text, ''),
			coalesce(i.void_reason, ''), coalesce(i.void_note, ''), i.flag_notes
		FROM invoices i
		WHERE i.id = $1 AND ($2 = '' OR i.account_id::text = $2) AND ($3 OR i.status <> 'draft')`, id, accountID, drafts).Scan(
		&v.ID, &v.AccountID, &period, &v.Status, &v.Number, &v.ReplacesInvoiceID, &v.ReplacesNumber,
		&v.ReplacedByInvoiceID,
		&v.Currency, &v.Total, &v.AmountDue, &v.Balance.Opening, &v.Balance.Purchases, &v.Balance.Refunds,
		&v.Balance.Adjustments, &v.Balance.CreditNotes, &v.Balance.UsageCharged, &v.Balance.Closing, &po,
		&buyer[0], &buyer[1], &buyer[2], &buyer[3], &seller[0], &seller[1], &seller[2], &seller[3],
		&flags, &v.ComputedAt, &v.CreatedAt, &v.IssuedAt, &v.IssuedBy, &v.PaidAt, &v.PaidBy, &v.PaymentReference,
		&v.VoidedAt, &v.VoidedBy, &reason, &v.VoidNote, &v.FlagNotes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Invoice{}, errInvoiceNotFound
	}
	if err != nil {
		return Invoice{}, err
	}
	// The account's name and the finance users' emails, in place of their ids.
	if err := nameParties(ctx, q, []*string{&v.AccountName}, []string{v.AccountID},
		[]*string{&v.IssuedBy, &v.PaidBy, &v.VoidedBy}); err != nil {
		return Invoice{}, err
	}
	v.Period, v.DisplayNumber, v.Flags, v.VoidReason = periodOfDate(period), displayNumber(v.Number), flagsOf(flags), VoidReason(reason)
	v.ComputedAt, v.CreatedAt = v.ComputedAt.UTC(), v.CreatedAt.UTC()
	v.IssuedAt, v.PaidAt, v.VoidedAt = utcPtr(v.IssuedAt), utcPtr(v.PaidAt), utcPtr(v.VoidedAt)
	v.Actions = invoiceActions(v.Status, v.AmountDue)
	if v.Status == StatusDraft {
		// A draft shows the customer's details and the seller's as they are now.
		d, err := s.billingDetailsWith(ctx, q, v.AccountID)
		if err != nil {
			return Invoice{}, err
		}
		v.Buyer, v.Seller, v.PONumber = d.Party, s.Seller(), d.PONumber
		if po.Valid {
			v.PONumber = po.String
		}
	} else {
		v.Buyer, v.Seller, v.PONumber = partyOf(buyer), partyOf(seller), po.String
	}
	if v.Lines, err = invoiceLines(ctx, q, v.ID); err != nil {
		return Invoice{}, err
	}
	rows, err := q.Query(ctx, `SELECT transaction_id::text, kind, memo, occurred_at, amount_pico FROM invoice_ledger_entries
		WHERE invoice_id = $1 ORDER BY occurred_at, transaction_id`, v.ID)
	if err != nil {
		return Invoice{}, err
	}
	if v.Entries, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (LedgerEntry, error) {
		var e LedgerEntry
		err := r.Scan(&e.TransactionID, &e.Kind, &e.Memo, &e.OccurredAt, &e.Amount)
		e.OccurredAt = e.OccurredAt.UTC()
		return e, err
	}); err != nil {
		return Invoice{}, err
	}
	rows, err = q.Query(ctx, creditNoteSummaryColumns+` WHERE cn.invoice_id = $1 ORDER BY cn.seq`, v.ID)
	if err != nil {
		return Invoice{}, err
	}
	if v.CreditNotes, err = pgx.CollectRows(rows, scanCreditNoteSummary); err != nil {
		return Invoice{}, err
	}
	v.Summary, err = invoiceSummary(ctx, q, v.ID)
	return v, err
}

// invoiceSummary reads an invoice's savings and carbon per tier, in tier order.
func invoiceSummary(ctx context.Context, q querier, invoiceID string) ([]reports.TierSummary, error) {
	rows, err := q.Query(ctx, `
		SELECT tier, spend_pico, spend_cents, baseline_pico, energy_kwh, measured_kwh, simulated_kwh, g_co2e, baseline_g_co2e,
			method_version
		FROM invoice_summaries WHERE invoice_id = $1
		ORDER BY array_position(ARRAY['realtime', 'standard', 'batch'], tier), tier`, invoiceID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (reports.TierSummary, error) {
		var t reports.TierSummary
		err := r.Scan(&t.Tier, &t.Spend, &t.SpendCents, &t.Baseline, &t.EnergyKWh, &t.MeasuredKWh, &t.SimulatedKWh, &t.GCO2e,
			&t.BaselineGCO2e, &t.MethodVersion)
		return t, err
	})
}

const creditNoteSummaryColumns = `
	SELECT cn.id::text, cn.number, cn.invoice_id::text, coalesce(i.number, ''), cn.period, cn.reason, cn.amount_cents,
		cn.credited_pico, cn.issued_at
	FROM credit_notes cn JOIN invoices i ON i.id = cn.invoice_id`

func scanCreditNoteSummary(r pgx.CollectableRow) (CreditNoteSummary, error) {
	var c CreditNoteSummary
	var period time.Time
	err := r.Scan(&c.ID, &c.Number, &c.InvoiceID, &c.InvoiceNumber, &period, &c.Reason, &c.Amount, &c.Credited, &c.IssuedAt)
	c.Period, c.IssuedAt = periodOfDate(period), c.IssuedAt.UTC()
	return c, err
}

// AccountCreditNotes lists the account's credit notes, latest period first and, within a
// period, the latest first.
func (s *Service) AccountCreditNotes(ctx context.Context, accountID string) (_ []CreditNoteSummary, err error) {
	defer services.Wrap(&err, "invoicing.AccountCreditNotes")
	if !isUUID(accountID) {
		return []CreditNoteSummary{}, nil
	}
	rows, err := s.pool.Query(ctx, creditNoteSummaryColumns+` WHERE cn.account_id = $1
		ORDER BY cn.period DESC, cn.issued_at DESC, cn.seq DESC`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanCreditNoteSummary)
}

// invoiceLines reads an invoice's lines in order, each priced line with when its price
// version took effect and whether it is a model's own (catalog.PricesByID).
func invoiceLines(ctx context.Context, q querier, invoiceID string) ([]InvoiceLine, error) {
	rows, err := q.Query(ctx, `
		SELECT l.line_no, l.kind, l.usage_period, l.tier, l.model, l.price_id, l.input_price, l.output_price,
			l.requests, l.input_tokens, l.output_tokens, l.uncharged_requests, l.uncharged_input_tokens,
			l.uncharged_output_tokens, l.charge_pico, l.payable_pico, l.amount_cents, l.description,
			coalesce(l.credit_note_id::text, ''), l.cached_input_price, l.cached_input_tokens, l.uncharged_cached_input_tokens
		FROM invoice_lines l
		WHERE l.invoice_id = $1 ORDER BY l.line_no`, invoiceID)
	if err != nil {
		return nil, err
	}
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (InvoiceLine, error) {
		var l InvoiceLine
		var usage pgtype.Date
		var in, out, cached pgtype.Int8
		err := r.Scan(&l.No, &l.Kind, &usage, &l.Tier, &l.Model, &l.PriceID, &in, &out, &l.Requests, &l.InputTokens,
			&l.OutputTokens, &l.UnchargedRequests, &l.UnchargedInputTokens, &l.UnchargedOutputTokens, &l.Charge, &l.payable,
			&l.Amount, &l.Description, &l.CreditNoteID, &cached, &l.CachedInputTokens, &l.UnchargedCachedInputTokens)
		if cached.Valid {
			c := money.MicroUSD(cached.Int64)
			l.CachedInputPrice = &c
		}
		if usage.Valid {
			l.UsagePeriod = periodOfDate(usage.Time)
		}
		if in.Valid {
			i, o := money.MicroUSD(in.Int64), money.MicroUSD(out.Int64)
			l.InputPrice, l.OutputPrice = &i, &o
		}
		return l, err
	})
	if err != nil {
		return nil, err
	}
	var priced []int64
	for _, l := range lines {
		if l.InputPrice != nil {
			priced = append(priced, l.PriceID)
		}
	}
	prices, err := catalog.PricesByID(ctx, q, priced)
	if err != nil {
		return nil, err
	}
	for i, l := range lines {
		if p, ok := prices[l.PriceID]; ok && l.InputPrice != nil {
			from := p.EffectiveFrom.UTC()
			lines[i].PriceFrom, lines[i].ModelPrice = &from, p.Model != ""
		}
	}
	return lines, nil
}

// CreditNote returns a credit note with the voided invoice's lines, for finance.
func (s *Service) CreditNote(ctx context.Context, id string) (CreditNote, error) {
	return s.creditNote(ctx, id, "")
}

// AccountCreditNote returns one of the account's credit notes, without the finance user who
// issued it; any other is not found.
func (s *Service) AccountCreditNote(ctx context.Context, accountID, id string) (CreditNote, error) {
	if !isUUID(accountID) {
		return CreditNote{}, errCreditNoteNotFound
	}
	c, err := s.creditNote(ctx, id, accountID)
	c.IssuedBy = ""
	return c, err
}

var errCreditNoteNotFound = services.Errorf(services.CodeNotFound, "No such credit note.")

func (s *Service) creditNote(ctx context.Context, id, accountID string) (_ CreditNote, err error) {
	defer services.Wrap(&err, "invoicing.CreditNote(%s)", id)
	if !isUUID(id) {
		return CreditNote{}, errCreditNoteNotFound
	}
	var c CreditNote
	var period time.Time
	var buyer, seller [4]pgtype.Text
	err = s.pool.QueryRow(ctx, `
		SELECT cn.id::text, cn.number, cn.invoice_id::text, coalesce(i.number, ''), cn.account_id::text, cn.period,
			i.currency, cn.reason, cn.note, cn.amount_cents, cn.credited_pico, coalesce(cn.ledger_transaction_id::text, ''),
			cn.regenerated_invoice_id::text, cn.po_number, cn.buyer_legal_name, cn.buyer_address, cn.buyer_country,
			cn.buyer_vat_id, cn.seller_name, cn.seller_address, cn.seller_country, cn.seller_vat_id, cn.issued_at,
			cn.issued_by::text
		FROM credit_notes cn
		JOIN invoices i ON i.id = cn.invoice_id
		WHERE cn.id = $1 AND ($2 = '' OR cn.account_id::text = $2)`, id, accountID).Scan(
		&c.ID, &c.Number, &c.InvoiceID, &c.InvoiceNumber, &c.AccountID, &period, &c.Currency, &c.Reason, &c.Note,
		&c.Amount, &c.Credited, &c.LedgerTransactionID, &c.RegeneratedInvoiceID, &c.PONumber, &buyer[0], &buyer[1],
		&buyer[2], &buyer[3], &seller[0], &seller[1], &seller[2], &seller[3], &c.IssuedAt, &c.IssuedBy)
	if errors.Is(err, pgx.ErrNoRows) {
		return CreditNote{}, errCreditNoteNotFound
	}
	if err != nil {
		return CreditNote{}, err
	}
	if err := nameParties(ctx, s.pool, []*string{&c.AccountName}, []string{c.AccountID}, []*string{&c.IssuedBy}); err != nil {
		return CreditNote{}, err
	}
	c.Period, c.ReasonText, c.IssuedAt = periodOfDate(period), c.Reason.Text(), c.IssuedAt.UTC()
	c.Buyer, c.Seller = partyOf(buyer), partyOf(seller)
	if c.Lines, err = invoiceLines(ctx, s.pool, c.InvoiceID); err != nil {
		return CreditNote{}, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT provider_account_id::text, amount_pico FROM credit_note_clawbacks WHERE credit_note_id = $1
		ORDER BY provider_account_id`, c.ID)
	if err != nil {
		return CreditNote{}, err
	}
	if c.Clawbacks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Clawback, error) {
		var b Clawback
		err := r.Scan(&b.ProviderAccountID, &b.Amount)
		return b, err
	}); err != nil {
		return CreditNote{}, err
	}
	providers := make([]string, len(c.Clawbacks))
	for i, b := range c.Clawbacks {
		providers[i] = b.ProviderAccountID
	}
	names, err := accounts.NamesByID(ctx, s.pool, providers)
	if err != nil {
		return CreditNote{}, err
	}
	for i := range c.Clawbacks {
		c.Clawbacks[i].ProviderName = names[c.Clawbacks[i].ProviderAccountID]
	}
	// By provider name, as the note lists them.
	slices.SortStableFunc(c.Clawbacks, func(a, b Clawback) int { return strings.Compare(a.ProviderName, b.ProviderName) })
	return c, nil
}

// nameParties writes, through q, the name of the account of each of accountIDs into the
// string of names at its index, and replaces each user id held in users by the user's email
// ("" for none or an unknown user): a document's parties and finance users, looked up by id
// (accounts.NamesByID, accounts.EmailsByID) after the document is read.
func nameParties(ctx context.Context, q querier, names []*string, accountIDs []string, users []*string) error {
	found, err := accounts.NamesByID(ctx, q, accountIDs)
	if err != nil {
		return err
	}
	for i, id := range accountIDs {
		*names[i] = found[id]
	}
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = *u
	}
	emails, err := accounts.EmailsByID(ctx, q, ids)
	if err != nil {
		return err
	}
	for i, id := range ids {
		*users[i] = emails[id]
	}
	return nil
}

// billingDetailsWith is BillingDetails on the given querier.
func (s *Service) billingDetailsWith(ctx context.Context, q querier, accountID string) (BillingDetails, error) {
	var name string
	var d BillingDetails
	b := &pgx.Batch{}
	queueDetails(b, []string{accountID}, func(string) (*string, *BillingDetails) { return &name, &d })
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return BillingDetails{}, err
	}
	return d, nil
}

func partyOf(v [4]pgtype.Text) Party {
	return Party{LegalName: v[0].String, Address: v[1].String, Country: v[2].String, VATID: v[3].String}.withCountryName()
}

func flagsOf(s []string) []Flag {
	out := make([]Flag, len(s))
	for i, f := range s {
		out[i] = Flag(f)
	}
	return out
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// pagePeriods narrows a list's WHERE clause to the periods that hold the page of limit rows at
// offset, the list sorted latest period first (Invoices, Statements): it counts the matching
// rows of each period and keeps the latest periods that the page and the row after it reach
// into, so that the rows of earlier periods are never read, nor those of later ones the page
// skips. It returns the narrowed clause and the page's offset in the narrowed list; ok is false
// when the page starts past the list's end. from is the table and its alias, as "invoices i".
func (s *Service) pagePeriods(ctx context.Context, from, alias string, w where, offset, limit int) (_ where, _ int, ok bool, err error) {
	rows, err := s.pool.Query(ctx, `SELECT `+alias+`.period, count(*) FROM `+from+w.sql()+` GROUP BY 1 ORDER BY 1 DESC`, w.args...)
	if err != nil {
		return where{}, 0, false, err
	}
	type periodCount struct {
		period time.Time
		n      int
	}
	counts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c periodCount, err error) {
		return c, r.Scan(&c.period, &c.n)
	})
	if err != nil {
		return where{}, 0, false, err
	}
	offset = max(offset, 0)
	var periods []time.Time
	skipped, reached := 0, 0
	for _, c := range counts {
		if len(periods) == 0 && skipped+c.n <= offset {
			skipped += c.n // wholly before the page
			continue
		}
		periods = append(periods, c.period)
		if reached += c.n; reached-(offset-skipped) > limit {
			break // the page and the row after it, which says whether more follow
		}
	}
	if len(periods) == 0 {
		return where{}, 0, false, nil
	}
	narrowed := where{conds: slices.Clone(w.conds), args: slices.Clone(w.args)}
	narrowed.add(alias+".period = ANY ($?::date[])", periods)
	return narrowed, offset - skipped, true, nil
}

// where builds a WHERE clause whose placeholders are written $? and numbered as added.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, v any) {
	w.args = append(w.args, v)
	w.conds = append(w.conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(w.args))))
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// page adds LIMIT and OFFSET as parameters.
func (w *where) page(limit, offset int) string {
	w.args = append(w.args, limit, offset)
	return fmt.Sprintf("LIMIT $%d OFFSET $%d", len(w.args)-1, len(w.args))
}
