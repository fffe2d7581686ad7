package invoicing

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
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

// payoutUnderway says whether the statement's payout (package payouts' table) is under way: an
// attempt holds it or ended without an outcome (pending), or a transfer may exist (in doubt).
// Money may then be leaving for the statement, which is neither voided nor marked paid by hand
// meanwhile (see docs/invoicing.md, "Paying statements").
const payoutUnderway = `EXISTS (SELECT 1 FROM payouts po WHERE po.statement_id = s.id::text
	AND (po.status = 'pending' OR po.in_doubt))`

const statementSummaryColumns = `
	SELECT s.id::text, s.provider_account_id::text, a.name, s.period, s.status, coalesce(s.number, ''), s.earnings_cents,
		s.late_earnings_cents, s.clawbacks_cents, s.carried_in_cents, s.net_cents, s.payout_cents, s.carried_out_cents,
		s.held_cents, s.flags, s.flag_notes, s.computed_at, s.issued_at, ` + laterIssued + `, ` + payoutUnderway + `
	FROM statements s JOIN accounts a ON a.id = s.provider_account_id`

func scanStatementSummary(r pgx.CollectableRow) (StatementSummary, error) {
	var v StatementSummary
	var period time.Time
	var flags []string
	var later, underway bool
	err := r.Scan(&v.ID, &v.ProviderAccountID, &v.ProviderName, &period, &v.Status, &v.Number, &v.Earnings,
		&v.LateEarnings, &v.Clawbacks, &v.CarriedIn, &v.Net, &v.Payout, &v.CarriedOut, &v.Held, &flags, &v.FlagNotes,
		&v.ComputedAt, &v.IssuedAt, &later, &underway)
	v.Period, v.DisplayNumber, v.Flags, v.Total = periodOfDate(period), displayNumber(v.Number), flagsOf(flags), v.Net
	v.Actions = statementActions(v.Status, v.Payout, later, underway)
	v.ComputedAt, v.IssuedAt = v.ComputedAt.UTC(), utcPtr(v.IssuedAt)
	return v, err
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
		w.add("a.name ILIKE $?", nameLike(f.ProviderName))
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
	rows, err := s.pool.Query(ctx, statementSummaryColumns+w.sql()+`
		ORDER BY s.period DESC, a.name, s.created_at, s.id `+w.page(limit+1, f.Offset), w.args...)
	if err != nil {
		return StatementPage{}, err
	}
	list, err := pgx.CollectRows(rows, scanStatementSummary)
	if err != nil {
		return StatementPage{}, err
	}
	page := StatementPage{Statements: list}
	if len(list) > limit {
		page.Statements, page.More = list[:limit], true
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
	rows, err := s.pool.Query(ctx, statementSummaryColumns+`
		WHERE s.provider_account_id = $1 AND s.status <> 'draft'
		ORDER BY s.period DESC, s.issued_at DESC`, providerID)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanStatementSummary)
	for i := range list {
		list[i].Flags, list[i].FlagNotes, list[i].Actions = []Flag{}, []string{}, []Action{}
	}
	return list, err
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
	var later, underway bool
	err = q.QueryRow(ctx, `
		SELECT s.id::text, s.provider_account_id::text, a.name, s.period, s.status, coalesce(s.number, ''),
			coalesce(s.replaces_statement_id::text, ''), s.currency, s.earnings_cents, s.late_earnings_cents,
			s.clawbacks_cents, s.carried_in_cents, s.net_cents, s.payout_cents, s.carried_out_cents, s.minimum_payout_cents,
			coalesce(s.carried_from_statement_id::text, ''), s.opening_payable_pico, s.usage_posted_pico,
			s.credit_notes_posted_pico, s.payouts_posted_pico, s.other_posted_pico, s.closing_payable_pico,
			s.payee_legal_name, s.payee_address, s.payee_country, s.payee_vat_id,
			s.payer_name, s.payer_address, s.payer_country, s.payer_vat_id,
			s.flags, s.computed_at, s.created_at, s.issued_at, coalesce(ui.email, ''), s.paid_at, coalesce(up.email, ''),
			coalesce(s.payment_reference, ''), s.voided_at, coalesce(uv.email, ''), coalesce(s.void_reason, ''),
			coalesce(s.void_note, ''), `+laterIssued+`, `+payoutUnderway+`, s.held_cents, s.flag_notes
		FROM statements s
		JOIN accounts a ON a.id = s.provider_account_id
		LEFT JOIN users ui ON ui.id = s.issued_by
		LEFT JOIN users up ON up.id = s.paid_by
		LEFT JOIN users uv ON uv.id = s.voided_by
		WHERE s.id = $1 AND ($2 = '' OR s.provider_account_id::text = $2) AND ($3 OR s.status <> 'draft')`,
		id, providerID, drafts).Scan(
		&v.ID, &v.ProviderAccountID, &v.ProviderName, &period, &v.Status, &v.Number, &v.ReplacesStatementID, &v.Currency,
		&v.Earnings, &v.LateEarnings, &v.Clawbacks, &v.CarriedIn, &v.Net, &v.Payout, &v.CarriedOut, &v.MinimumPayout,
		&v.CarriedFromStatementID, &v.Payable.Opening, &v.Payable.Usage, &v.Payable.CreditNotes, &v.Payable.Payouts,
		&v.Payable.Other, &v.Payable.Closing, &payee[0], &payee[1], &payee[2], &payee[3], &payer[0], &payer[1], &payer[2],
		&payer[3], &flags, &v.ComputedAt, &v.CreatedAt, &v.IssuedAt, &v.IssuedBy, &v.PaidAt, &v.PaidBy,
		&v.PaymentReference, &v.VoidedAt, &v.VoidedBy, &reason, &v.VoidNote, &later, &underway, &v.Held, &v.FlagNotes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Statement{}, errStatementNotFound
	}
	if err != nil {
		return Statement{}, err
	}
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
