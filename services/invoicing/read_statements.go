package invoicing

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
)

// Reading statements: finance reads any (Statement, Statements), a provider only its own that
// are issued (ProviderStatement, ProviderStatements).

var errStatementNotFound = services.Errorf(services.CodeNotFound, "No such statement.")

// StatementSummary is a statement in a list.
type StatementSummary struct {
	ID                string     `json:"id"`
	ProviderAccountID string     `json:"provider_account_id"`
	ProviderName      string     `json:"provider_name"`
	Period            Period     `json:"period"`
	Status            Status     `json:"status"`
	Number            string     `json:"number"`
	DisplayNumber     string     `json:"display_number"`
	Earnings          Cents      `json:"earnings_cents"`
	LateEarnings      Cents      `json:"late_earnings_cents"`
	Clawbacks         Cents      `json:"clawbacks_cents"`
	CarriedIn         Cents      `json:"carried_in_cents"`
	Net               Cents      `json:"net_cents"`
	Total             Cents      `json:"total_cents"` // as its document prints it: Net
	Payout            Cents      `json:"payout_cents"`
	CarriedOut        Cents      `json:"carried_out_cents"`
	Held              Cents      `json:"held_cents"` // released less held earnings of flagged requests
	Flags             []Flag     `json:"flags"`
	FlagNotes         []string   `json:"flag_notes"` // what each flag is about, and how much
	Actions           []Action   `json:"actions"`
	ComputedAt        time.Time  `json:"computed_at"`
	IssuedAt          *time.Time `json:"issued_at,omitempty"`
}

// StatementFilter selects statements. Zero values filter nothing.
type StatementFilter struct {
	Period            Period
	Status            Status
	ProviderAccountID string
	// ProviderName selects the providers whose name holds it, in any case.
	ProviderName string
	Flag         Flag
	// MinTotal and MaxTotal bound the statement's total (its net), inclusive.
	MinTotal, MaxTotal *Cents
	Limit, Offset      int
}

// Validate names every bad field.
func (f StatementFilter) Validate() error {
	fe := services.FieldErrors{}
	if f.Status != "" && !f.Status.Valid() {
		fe.Add("status", "Choose draft, issued, paid or void.")
	}
	if f.ProviderAccountID != "" && !isUUID(f.ProviderAccountID) {
		fe.Add("provider_account_id", "Choose a provider.")
	}
	checkListFilter(fe, "provider_name", f.ProviderName, f.Flag, f.MinTotal, f.MaxTotal, f.Limit, f.Offset)
	return fe.Err()
}

// StatementPage is a page of statements: latest period first, then by provider name.
type StatementPage struct {
	Statements []StatementSummary `json:"statements"`
	More       bool               `json:"more"`
}

// laterIssued says whether a later statement of the same provider is issued, which a void
// would leave carrying on from a document that no longer stands.
const laterIssued = `EXISTS (SELECT 1 FROM statements l WHERE l.provider_account_id = s.provider_account_id
	AND l.period > s.period AND l.status IN ('issued', 'paid'))`

const statementSummaryColumns = `
	SELECT s.id::text, s.provider_account_id::text, s.period, s.status, coalesce(s.number, ''), s.earnings_cents,
		s.late_earnings_cents, s.clawbacks_cents, s.carried_in_cents, s.net_cents, s.payout_cents, s.carried_out_cents,
		s.held_cents, s.flags, s.flag_notes, s.computed_at, s.issued_at, ` + laterIssued + `, s.created_at
	FROM statements s`

// listedStatement is a statement in a list, with whether a later statement of its provider is
// issued and when it was made, which orders statements of one provider and period.
type listedStatement struct {
	StatementSummary
	later     bool
	createdAt time.Time
}

func scanStatementSummary(r pgx.CollectableRow) (listedStatement, error) {
	var v listedStatement
	var period time.Time
	var flags []string
	err := r.Scan(&v.ID, &v.ProviderAccountID, &period, &v.Status, &v.Number, &v.Earnings,
		&v.LateEarnings, &v.Clawbacks, &v.CarriedIn, &v.Net, &v.Payout, &v.CarriedOut, &v.Held, &flags, &v.FlagNotes,
		&v.ComputedAt, &v.IssuedAt, &v.later, &v.createdAt)
	v.Period, v.DisplayNumber, v.Flags, v.Total = periodOfDate(period), displayNumber(v.Number), flagsOf(flags), v.Net
	v.ComputedAt, v.IssuedAt = v.ComputedAt.UTC(), utcPtr(v.IssuedAt)
	return v, err
}

// readStatementSummaries reads the statements a query of statementSummaryColumns selects,
// each named by its provider's name (accounts.NamesByID), with the actions finance may take
// on it, which depend on whether its payout is under way (payouts.UnderwayOf).
func (s *Service) readStatementSummaries(ctx context.Context, sql string, args ...any) ([]listedStatement, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanStatementSummary)
	if err != nil {
		return nil, err
	}
	providers, ids := make([]string, len(list)), make([]string, len(list))
	for i, v := range list {
		providers[i], ids[i] = v.ProviderAccountID, v.ID
	}
	names, err := accounts.NamesByID(ctx, s.pool, providers)
	if err != nil {
		return nil, err
	}
	underway, err := payouts.UnderwayOf(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	for i := range list {
		v := &list[i]
		v.ProviderName = names[v.ProviderAccountID]
		v.Actions = statementActions(v.Status, v.Payout, v.later, underway[v.ID])
	}
	return list, nil
}

// Statements lists the statements that match the filter, for finance.
func (s *Service) Statements(ctx context.Context, f StatementFilter) (_ StatementPage, err error) {
	defer services.Wrap(&err, "invoicing.Statements")
	if err := f.Validate(); err != nil {
		return StatementPage{}, err
	}
	w := where{}
	if !f.Period.IsZero() {
		w.add("s.period = $?", f.Period.Start())
	}
	if f.Status != "" {
		w.add("s.status = $?", string(f.Status))
	}
	if f.ProviderAccountID != "" {
		w.add("s.provider_account_id = $?::uuid", f.ProviderAccountID)
	}
	if f.ProviderName != "" {
		named, err := accounts.IDsNamedLike(ctx, s.pool, f.ProviderName)
		if err != nil {
			return StatementPage{}, err
		}
		w.add("s.provider_account_id = ANY ($?::text[]::uuid[])", named)
	}
	if f.MinTotal != nil {
		w.add("s.net_cents >= $?", int64(*f.MinTotal))
	}
	if f.MaxTotal != nil {
		w.add("s.net_cents <= $?", int64(*f.MaxTotal))
	}
	if f.Flag != "" {
		w.add("$? = ANY (s.flags)", string(f.Flag))
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	w, offset, ok, err := s.pagePeriods(ctx, "statements s", "s", w, f.Offset, limit)
	if err != nil || !ok {
		return StatementPage{Statements: []StatementSummary{}}, err
	}
	list, err := s.readStatementSummaries(ctx, statementSummaryColumns+w.sql(), w.args...)
	if err != nil {
		return StatementPage{}, err
	}
	// Latest period first, then by provider name, then as made: sorted after the names are
	// looked up, and paged then, among the periods the page reaches into.
	slices.SortFunc(list, func(a, b listedStatement) int {
		return cmp.Or(b.Period.Start().Compare(a.Period.Start()), strings.Compare(a.ProviderName, b.ProviderName),
			a.createdAt.Compare(b.createdAt), strings.Compare(a.ID, b.ID))
	})
	shown, more := pageOf(list, offset, limit)
	page := StatementPage{Statements: make([]StatementSummary, len(shown)), More: more}
	for i, v := range shown {
		page.Statements[i] = v.StatementSummary
	}
	return page, nil
}

// ProviderStatements lists a provider's statements that are not drafts, latest first, as the
// provider sees them (see docs/invoicing.md, "Customers and providers").
func (s *Service) ProviderStatements(ctx context.Context, providerID string) (_ []StatementSummary, err error) {
	defer services.Wrap(&err, "invoicing.ProviderStatements")
	if !isUUID(providerID) {
		return []StatementSummary{}, nil
	}
	list, err := s.readStatementSummaries(ctx, statementSummaryColumns+`
		WHERE s.provider_account_id = $1 AND s.status <> 'draft'
		ORDER BY s.period DESC, s.issued_at DESC`, providerID)
	if err != nil {
		return nil, err
	}
	out := make([]StatementSummary, len(list))
	for i, v := range list {
		out[i] = v.StatementSummary
		out[i].Flags, out[i].FlagNotes, out[i].Actions = []Flag{}, []string{}, []Action{}
	}
	return out, nil
}

// StatementsByID returns the summaries of the statements with these ids, by id, for finance, in
// one query: ids of no statement are left out.
func (s *Service) StatementsByID(ctx context.Context, ids []string) (_ map[string]StatementSummary, err error) {
	defer services.Wrap(&err, "invoicing.StatementsByID")
	ids = uuidsOf(ids)
	out := make(map[string]StatementSummary, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := s.readStatementSummaries(ctx, statementSummaryColumns+` WHERE s.id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, err
	}
	for _, v := range list {
		out[v.ID] = v.StatementSummary
	}
	return out, nil
}

// Statement returns a statement with its lines, for finance.
func (s *Service) Statement(ctx context.Context, id string) (Statement, error) {
	return s.statement(ctx, s.pool, id, "", true)
}

// ProviderStatement returns one of the provider's statements that is not a draft, as the
// provider sees it; any other is not found.
func (s *Service) ProviderStatement(ctx context.Context, providerID, id string) (Statement, error) {
	if !isUUID(providerID) {
		return Statement{}, errStatementNotFound
	}
	v, err := s.statement(ctx, s.pool, id, providerID, false)
	return v.forProvider(), err
}

// forProvider is what a provider sees of its own statement: the document, without finance's
// review flags, the actions only finance takes, or the finance users who took them.
func (v Statement) forProvider() Statement {
	v.Flags, v.FlagNotes, v.Actions = []Flag{}, []string{}, []Action{}
	v.IssuedBy, v.PaidBy, v.VoidedBy = "", "", ""
	return v
}

func (s *Service) statement(ctx context.Context, q querier, id, providerID string, drafts bool) (_ Statement, err error) {
	defer services.Wrap(&err, "invoicing.Statement(%s)", id)
	if !isUUID(id) {
		return Statement{}, errStatementNotFound
	}
	var v Statement
	var period time.Time
	var flags []string
	var payee, payer [4]pgtype.Text
	var reason string
	var later bool
	err = q.QueryRow(ctx, `
		SELECT s.id::text, s.provider_account_id::text, s.period, s.status, coalesce(s.number, ''),
			coalesce(s.replaces_statement_id::text, ''), s.currency, s.earnings_cents, s.late_earnings_cents,
			s.clawbacks_cents, s.carried_in_cents, s.net_cents, s.payout_cents, s.carried_out_cents, s.minimum_payout_cents,
			coalesce(s.carried_from_statement_id::text, ''), s.opening_payable_pico, s.usage_posted_pico,
			s.credit_notes_posted_pico, s.payouts_posted_pico, s.other_posted_pico, s.closing_payable_pico,
			s.payee_legal_name, s.payee_address, s.payee_country, s.payee_vat_id,
			s.payer_name, s.payer_address, s.payer_country, s.payer_vat_id,
			s.flags, s.computed_at, s.created_at, s.issued_at, coalesce(s.issued_by::text, ''), s.paid_at,
			coalesce(s.paid_by::text, ''), coalesce(s.payment_reference, ''), s.voided_at, coalesce(s.voided_by::text, ''),
			coalesce(s.void_reason, ''), coalesce(s.void_note, ''), `+laterIssued+`, s.held_cents, s.flag_notes
		FROM statements s
		WHERE s.id = $1 AND ($2 = '' OR s.provider_account_id::text = $2) AND ($3 OR s.status <> 'draft')`,
		id, providerID, drafts).Scan(
		&v.ID, &v.ProviderAccountID, &period, &v.Status, &v.Number, &v.ReplacesStatementID, &v.Currency,
		&v.Earnings, &v.LateEarnings, &v.Clawbacks, &v.CarriedIn, &v.Net, &v.Payout, &v.CarriedOut, &v.MinimumPayout,
		&v.CarriedFromStatementID, &v.Payable.Opening, &v.Payable.Usage, &v.Payable.CreditNotes, &v.Payable.Payouts,
		&v.Payable.Other, &v.Payable.Closing, &payee[0], &payee[1], &payee[2], &payee[3], &payer[0], &payer[1], &payer[2],
		&payer[3], &flags, &v.ComputedAt, &v.CreatedAt, &v.IssuedAt, &v.IssuedBy, &v.PaidAt, &v.PaidBy,
		&v.PaymentReference, &v.VoidedAt, &v.VoidedBy, &reason, &v.VoidNote, &later, &v.Held, &v.FlagNotes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Statement{}, errStatementNotFound
	}
	if err != nil {
		return Statement{}, err
	}
	// The provider's name and the finance users' emails, in place of their ids; whether its
	// payout is under way.
	if err := nameParties(ctx, q, []*string{&v.ProviderName}, []string{v.ProviderAccountID},
		[]*string{&v.IssuedBy, &v.PaidBy, &v.VoidedBy}); err != nil {
		return Statement{}, err
	}
	payingOut, err := payouts.UnderwayOf(ctx, q, []string{v.ID})
	if err != nil {
		return Statement{}, err
	}
	underway := payingOut[v.ID]
	v.Period, v.DisplayNumber, v.Flags, v.VoidReason = periodOfDate(period), displayNumber(v.Number), flagsOf(flags), VoidReason(reason)
	v.ComputedAt, v.CreatedAt = v.ComputedAt.UTC(), v.CreatedAt.UTC()
	v.IssuedAt, v.PaidAt, v.VoidedAt = utcPtr(v.IssuedAt), utcPtr(v.PaidAt), utcPtr(v.VoidedAt)
	v.Actions, v.Total = statementActions(v.Status, v.Payout, later, underway), v.Net
	if v.Status == StatusDraft {
		d, err := s.billingDetailsWith(ctx, q, v.ProviderAccountID)
		if err != nil {
			return Statement{}, err
		}
		v.Payee, v.Payer = d.Party, s.Seller()
	} else {
		v.Payee, v.Payer = partyOf(payee), partyOf(payer)
	}
	rows, err := q.Query(ctx, `
		SELECT line_no, kind, usage_period, coalesce(offering_id::text, ''), model, ask_input_price, ask_output_price,
			requests, input_tokens, output_tokens, uncharged_requests, uncharged_input_tokens, uncharged_output_tokens,
			payable_pico, amount_cents, description, coalesce(transaction_id::text, ''), coalesce(credit_note_id::text, ''),
			coalesce(ask_cached_input_price, ask_input_price), cached_input_tokens, uncharged_cached_input_tokens
		FROM statement_lines WHERE statement_id = $1 ORDER BY line_no`, v.ID)
	if err != nil {
		return Statement{}, err
	}
	v.Lines, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatementLine, error) {
		var l StatementLine
		var usage pgtype.Date
		var in, out, cached int64
		err := r.Scan(&l.No, &l.Kind, &usage, &l.OfferingID, &l.Model, &in, &out, &l.Requests, &l.InputTokens,
			&l.OutputTokens, &l.UnchargedRequests, &l.UnchargedInputTokens, &l.UnchargedOutputTokens, &l.Earned, &l.Amount,
			&l.Description, &l.TransactionID, &l.CreditNoteID, &cached, &l.CachedInputTokens, &l.UnchargedCachedInputTokens)
		l.AskCachedInput = money.MicroUSD(cached)
		if usage.Valid {
			l.UsagePeriod = periodOfDate(usage.Time)
		}
		l.AskInput, l.AskOutput = money.MicroUSD(in), money.MicroUSD(out)
		return l, err
	})
	return v, err
}
