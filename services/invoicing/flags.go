package invoicing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
)

// Flagged requests and their resolution (see docs/invoicing.md, "Flags and held earnings").
// A request is flagged with an excess when its rig reported more tokens than were billed, or
// was billed more than its response told the customer: the rig claimed money, and its
// earnings on the request are held out of its provider's statements until finance resolves
// the flag. Released, they are paid on the statement of the month of the release; clawed back,
// the provider's payable gives them up and the customer's credit gets back what the request
// was charged, the platform's revenue giving up its margin, in one ledger transaction.

// Which usage rows are flagged with an excess is package metering's to say
// (metering.ReportedAboveBilled, metering.BilledAboveResponse), the gateway's flags and what
// each response told coming from package requestlog's log. A row flagged without an excess
// puts no money at stake and is never held or flagged on a document.

// flagParty says whose requests a close's chunk reads the flags of.
type flagParty int

const (
	customerFlags flagParty = iota
	providerFlags
)

// periodFlags are the reads of the requests of a period flagged with an excess, of a chunk of
// customers or providers, with their resolutions. The first reads go on the chunk's batch
// (queuePeriodFlags): the requests the gateway flagged since the period began, and the rows the
// meter flagged. The usage rows of the requests the gateway flagged, and the resolutions of
// all, hang on them and go on a second batch (queueRest), which has nothing to read unless
// something was flagged.
type periodFlags struct {
	scope       metering.FlagScope
	told        []metering.ResponseTokens
	rows        map[string]metering.FlaggedUsage
	resolutions map[string]flagResolution
}

// flaggedRequest is a request flagged with an excess, with its resolution.
type flaggedRequest struct {
	usage metering.FlaggedUsage
	flagResolution
}

// flagResolution is a flag's resolution; the zero value while it has none.
type flagResolution struct {
	resolution Resolution
	resolvedAt time.Time
}

// queuePeriodFlags queues the first reads of the flagged requests of period p (metered in it
// or later) of the parties of ids. The gateway records the customer's account only: a
// provider's chunk reads every request it flagged since the period began.
func queuePeriodFlags(b *pgx.Batch, p Period, party flagParty, ids []string) *periodFlags {
	f := &periodFlags{scope: metering.FlagScope{From: p.Start(), To: p.End()}, rows: map[string]metering.FlaggedUsage{},
		resolutions: map[string]flagResolution{}}
	var accountIDs []string
	if party == customerFlags {
		f.scope.AccountIDs, accountIDs = ids, ids
	} else {
		f.scope.ProviderIDs = ids
	}
	requestlog.QueueFlaggedSince(b, p.Start(), accountIDs, func(r requestlog.Response) {
		f.told = append(f.told, metering.ResponseTokens{RequestID: r.RequestID, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens})
	})
	metering.QueueReportedAboveBilled(b, f.scope, f.add)
	return f
}

func (f *periodFlags) add(u metering.FlaggedUsage) { f.rows[u.RequestID] = u }

// queueRest queues on b the reads that hang on the first ones: the usage rows of the requests
// the gateway flagged that were billed above their responses, and the resolutions of every
// request flagged (those of the gateway's that turn out not to be are read and left unused).
func (f *periodFlags) queueRest(b *pgx.Batch) {
	metering.QueueBilledAboveResponse(b, f.scope, f.told, f.add)
	ids := make([]string, 0, len(f.rows)+len(f.told))
	for id := range f.rows {
		ids = append(ids, id)
	}
	for _, t := range f.told {
		ids = append(ids, t.RequestID)
	}
	if len(ids) > 0 {
		queueResolutions(b, ids, func(id string, r flagResolution) { f.resolutions[id] = r })
	}
}

// flagged are the flagged requests read, each once, with their resolutions.
func (f *periodFlags) flagged() []flaggedRequest {
	out := make([]flaggedRequest, 0, len(f.rows))
	for id, u := range f.rows {
		out = append(out, flaggedRequest{usage: u, flagResolution: f.resolutions[id]})
	}
	return out
}

// queueResolutions queues on b the read of the resolutions of the requests of ids, and calls
// each with every one as the batch is read.
func queueResolutions(b *pgx.Batch, ids []string, each func(id string, r flagResolution)) {
	b.Queue(`SELECT request_id, resolution, resolved_at FROM flag_resolutions WHERE request_id = ANY ($1::text[])`, ids).
		Query(func(rows pgx.Rows) error {
			var id string
			var r flagResolution
			_, err := pgx.ForEachRow(rows, []any{&id, &r.resolution, &r.resolvedAt}, func() error {
				each(id, r)
				return nil
			})
			return err
		})
}

// Resolution is finance's decision on a flagged request.
type Resolution string

// The resolutions.
const (
	// ResolutionRelease accepts the request's bill: its held earnings are paid to the provider
	// on the statement of the month of the release.
	ResolutionRelease Resolution = "released"
	// ResolutionClawBack takes the request's earnings back from the provider and gives the
	// customer back what it was charged.
	ResolutionClawBack Resolution = "clawed_back"
)

// Valid reports whether r is a known resolution.
func (r Resolution) Valid() bool { return r == ResolutionRelease || r == ResolutionClawBack }

// MaxFlagNote bounds a resolution's note.
const MaxFlagNote = 500

// FlaggedRequest is a request flagged with an excess, as finance reviews it.
type FlaggedRequest struct {
	RequestID    string    `json:"request_id"`
	OccurredAt   time.Time `json:"occurred_at"`
	Period       Period    `json:"period"`
	AccountID    string    `json:"account_id"`
	AccountName  string    `json:"account_name"`
	ProviderID   string    `json:"provider_account_id"`
	ProviderName string    `json:"provider_name"`
	Model        string    `json:"model"`
	// Reported is what the rig reported, Billed what the meter billed, Seen what the response
	// told the customer (null when it told nothing), Excess the larger of what the rig reported
	// beyond the bill and what the bill went beyond the response, input and output tokens each.
	ReportedInput  int64  `json:"reported_input_tokens"`
	ReportedOutput int64  `json:"reported_output_tokens"`
	BilledInput    int64  `json:"billed_input_tokens"`
	BilledOutput   int64  `json:"billed_output_tokens"`
	SeenInput      *int64 `json:"response_input_tokens"`
	SeenOutput     *int64 `json:"response_output_tokens"`
	ExcessInput    int64  `json:"excess_input_tokens"`
	ExcessOutput   int64  `json:"excess_output_tokens"`
	MeterFlag      string `json:"meter_flag"`
	Reason         string `json:"reason"`
	// Charged is what the customer paid for the request, Earned the provider's earnings on
	// it, held until the flag is resolved; Charge and Payable the same, exactly.
	Charged Cents         `json:"charged_cents"`
	Earned  Cents         `json:"earned_cents"`
	Charge  money.BigPico `json:"charge_pico"`
	Payable money.BigPico `json:"payable_pico"`
	// Resolution is "" while unresolved.
	Resolution    Resolution `json:"resolution,omitempty"`
	ResolvedAt    *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy    string     `json:"resolved_by,omitempty"` // the finance user's email
	Note          string     `json:"note,omitempty"`
	TransactionID string     `json:"transaction_id,omitempty"`
}

// FlagFilter narrows the flagged requests listed: by period, customer or provider, and to the
// unresolved ones.
type FlagFilter struct {
	Period     Period
	AccountID  string
	ProviderID string
	Unresolved bool
	Limit      int
}

// FlaggedRequests lists the requests flagged with an excess, the latest first.
func (s *Service) FlaggedRequests(ctx context.Context, f FlagFilter) (_ []FlaggedRequest, err error) {
	defer services.Wrap(&err, "invoicing.FlaggedRequests")
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 200
	}
	scope := metering.FlagScope{Limit: f.Limit}
	if !f.Period.IsZero() {
		scope.From, scope.To = f.Period.Start(), f.Period.End()
	}
	if f.AccountID != "" {
		if !isUUID(f.AccountID) {
			return []FlaggedRequest{}, nil
		}
		scope.AccountIDs = []string{f.AccountID}
	}
	if f.ProviderID != "" {
		if !isUUID(f.ProviderID) {
			return []FlaggedRequest{}, nil
		}
		scope.ProviderIDs = []string{f.ProviderID}
	}
	// The requests the gateway flagged, with what their responses told, and those resolved
	// already when only the unresolved are asked for.
	var told []metering.ResponseTokens
	b := &pgx.Batch{}
	requestlog.QueueFlaggedSince(b, time.Time{}, nil, func(r requestlog.Response) {
		told = append(told, metering.ResponseTokens{RequestID: r.RequestID, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens})
	})
	if f.Unresolved {
		b.Queue(`SELECT request_id FROM flag_resolutions`).Query(func(rows pgx.Rows) error {
			var err error
			scope.Except, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	// The latest rows of either kind, each of the two limited as the whole is: together they
	// hold the latest of the whole.
	byMeter, err := metering.ReportedAboveBilled(ctx, s.pool, scope)
	if err != nil {
		return nil, err
	}
	byGateway, err := metering.BilledAboveResponse(ctx, s.pool, scope, told)
	if err != nil {
		return nil, err
	}
	rows := byMeter
	seen := make(map[string]bool, len(byMeter))
	for _, u := range byMeter {
		seen[u.RequestID] = true
	}
	for _, u := range byGateway {
		if !seen[u.RequestID] {
			rows = append(rows, u)
		}
	}
	slices.SortFunc(rows, func(a, b metering.FlaggedUsage) int {
		if c := b.OccurredAt.Compare(a.OccurredAt); c != 0 {
			return c
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
	rows = rows[:min(len(rows), f.Limit)]

	// What the gateway saw of each, its resolution and the names of its parties.
	ids := make([]string, len(rows))
	parties := make([]string, 0, 2*len(rows))
	for i, u := range rows {
		ids[i] = u.RequestID
		parties = append(parties, u.AccountID, u.ProviderID)
	}
	responses := map[string]requestlog.Response{}
	type resolution struct {
		resolution      Resolution
		resolvedAt      time.Time
		by, note, txnID string
	}
	resolutions := map[string]resolution{}
	b = &pgx.Batch{}
	requestlog.QueueResponses(b, ids, func(r requestlog.Response) { responses[r.RequestID] = r })
	b.Queue(`SELECT request_id, resolution, resolved_at, resolved_by::text, note, coalesce(transaction_id::text, '')
		FROM flag_resolutions WHERE request_id = ANY ($1::text[])`, ids).Query(func(rows pgx.Rows) error {
		var id string
		var r resolution
		_, err := pgx.ForEachRow(rows, []any{&id, &r.resolution, &r.resolvedAt, &r.by, &r.note, &r.txnID}, func() error {
			resolutions[id] = r
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	resolvers := make([]string, 0, len(resolutions))
	for _, r := range resolutions {
		resolvers = append(resolvers, r.by)
	}
	names, err := accounts.NamesByID(ctx, s.pool, parties)
	if err != nil {
		return nil, err
	}
	emails, err := accounts.EmailsByID(ctx, s.pool, resolvers)
	if err != nil {
		return nil, err
	}

	out := make([]FlaggedRequest, 0, len(rows))
	for _, u := range rows {
		g, r := responses[u.RequestID], resolutions[u.RequestID]
		v := FlaggedRequest{RequestID: u.RequestID, OccurredAt: u.OccurredAt, AccountID: u.AccountID, AccountName: names[u.AccountID],
			ProviderID: u.ProviderID, ProviderName: names[u.ProviderID], Model: u.Model, BilledInput: u.InputTokens,
			BilledOutput: u.OutputTokens, SeenInput: g.InputTokens, SeenOutput: g.OutputTokens, MeterFlag: u.Flag,
			Reason: joinPresent("; ", g.FlagReason, u.FlagReason), Charge: u.Charge, Payable: u.Payable,
			Resolution: r.resolution, ResolvedBy: emails[r.by], Note: r.note, TransactionID: r.txnID}
		v.ReportedInput, v.ReportedOutput = u.InputTokens, u.OutputTokens
		if u.ReportedInputTokens != nil {
			v.ReportedInput = *u.ReportedInputTokens
		}
		if u.ReportedOutputTokens != nil {
			v.ReportedOutput = *u.ReportedOutputTokens
		}
		if r.resolution != "" {
			at := r.resolvedAt
			v.ResolvedAt = &at
		}
		v.ExcessInput, v.ExcessOutput = excess(v.ReportedInput, v.BilledInput, v.SeenInput), excess(v.ReportedOutput, v.BilledOutput, v.SeenOutput)
		v.Period = PeriodOf(v.OccurredAt)
		if v.Charged, err = CentsOf(v.Charge); err != nil {
			return nil, err
		}
		if v.Earned, err = CentsOf(v.Payable); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// joinPresent joins the parts that are there with sep, as PostgreSQL's concat_ws does.
func joinPresent(sep string, parts ...*string) string {
	var present []string
	for _, p := range parts {
		if p != nil {
			present = append(present, *p)
		}
	}
	return strings.Join(present, sep)
}

// ResolveInput is finance's resolution of a flagged request.
type ResolveInput struct {
	RequestID  string
	By         string // the finance user
	Resolution Resolution
	Note       string
}

// Resolved is what a resolution did.
type Resolved struct {
	RequestID  string     `json:"request_id"`
	Resolution Resolution `json:"resolution"`
	// Released is the provider's earnings paid on a later statement (a release); ClawedBack
	// what its payable gave up and Credited what the customer's credit got back (a claw back).
	Released      money.BigPico `json:"released_pico"`
	ClawedBack    money.BigPico `json:"clawed_back_pico"`
	Credited      money.BigPico `json:"credited_pico"`
	TransactionID string        `json:"transaction_id,omitempty"`
}

var errFlagNotFound = services.Errorf(services.CodeNotFound, "No request flagged with an excess has that id.")

// ResolveFlag records finance's resolution of a request flagged with an excess, once: a
// release, or a claw back with its ledger transaction, in one database transaction with the
// audit record.
func (s *Service) ResolveFlag(ctx context.Context, in ResolveInput) (_ Resolved, err error) {
	defer services.Wrap(&err, "invoicing.ResolveFlag(%s)", in.RequestID)
	in.Note = strings.TrimSpace(in.Note)
	fe := services.FieldErrors{}
	if !in.Resolution.Valid() {
		fe.Add("resolution", "Choose released or clawed_back.")
	}
	if utf8.RuneCountInString(in.Note) > MaxFlagNote || hasControl(in.Note, true) {
		fe.Add("note", fmt.Sprintf("Use at most %d characters of text.", MaxFlagNote))
	}
	if !isUUID(in.By) {
		fe.Add("by", "Flags are resolved by a finance user.")
	}
	if err := fe.Err(); err != nil {
		return Resolved{}, err
	}
	if in.RequestID == "" || len(in.RequestID) > 200 {
		return Resolved{}, errFlagNotFound
	}
	u, found, err := metering.UsageOfRequest(ctx, s.pool, in.RequestID)
	if err != nil {
		return Resolved{}, err
	}
	flagged := found && u.ReportedAboveBilled()
	if found && !flagged {
		var g *requestlog.Response
		b := &pgx.Batch{}
		requestlog.QueueResponses(b, []string{in.RequestID}, func(r requestlog.Response) { g = &r })
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return Resolved{}, err
		}
		flagged = g != nil && g.FlaggedAt != nil &&
			u.BilledAbove(metering.ResponseTokens{RequestID: g.RequestID, InputTokens: g.InputTokens, OutputTokens: g.OutputTokens})
	}
	if !flagged {
		return Resolved{}, errFlagNotFound
	}
	v := struct {
		account, provider, model string
		occurred                 time.Time
		charge, payable          money.BigPico
	}{u.AccountID, u.ProviderID, u.Model, u.OccurredAt, u.Charge, u.Payable}
	// The ledger accounts a claw back posts to, looked up before the transaction (AccountFor
	// uses a connection of its own).
	var customer, payable, revenue ledger.LedgerAccountID
	if in.Resolution == ResolutionClawBack {
		if customer, err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountCustomerCredit, v.account); err != nil {
			return Resolved{}, err
		}
		if payable, err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountProviderPayable, v.provider); err != nil {
			return Resolved{}, err
		}
		if revenue, err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountPlatformRevenue, ""); err != nil {
			return Resolved{}, err
		}
	}
	out := Resolved{RequestID: in.RequestID, Resolution: in.Resolution}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The provider's documents wait for the resolution, and it for them.
		if err := lockAccounts(ctx, tx, lockProvider, []string{v.provider}); err != nil {
			return err
		}
		var done string
		err := tx.QueryRow(ctx, `SELECT resolution FROM flag_resolutions WHERE request_id = $1`, in.RequestID).Scan(&done)
		if err == nil {
			return services.Errorf(services.CodeConflict, "The flag on request %s is resolved already: %s.", in.RequestID,
				strings.ReplaceAll(done, "_", " "))
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		now := s.now().UTC()
		var txnID pgtype.Text
		if in.Resolution == ResolutionClawBack {
			postings, err := clawBackPostings(v.charge, v.payable, customer, payable, revenue)
			if err != nil {
				return err
			}
			if len(postings) > 0 {
				txn, _, err := s.cfg.Ledger.PostTx(ctx, tx, ledger.TransactionInput{
					Kind: ledger.TransactionAdjustment, IdempotencyKey: "flag-claw-back:" + in.RequestID, CreatedBy: in.By,
					OccurredAt: now, Memo: fmt.Sprintf("Flagged request %s clawed back from its provider and credited to its customer",
						in.RequestID),
					Postings: postings,
				})
				if err != nil {
					return err
				}
				txnID = pgtype.Text{String: txn.ID, Valid: true}
				out.TransactionID = txn.ID
			}
			out.ClawedBack, out.Credited = v.payable, v.charge
		} else {
			out.Released = v.payable
		}
		resolution := in.Resolution
		if resolution == ResolutionClawBack && !txnID.Valid {
			// Nothing was charged nor earned: there is nothing to take back, and the table
			// records a claw back only with its transaction.
			resolution = ResolutionRelease
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO flag_resolutions (request_id, account_id, provider_account_id, occurred_at, held_pico, resolution, note,
				resolved_by, resolved_at, transaction_id)
			VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, $8, $9, $10::uuid)`,
			in.RequestID, v.account, v.provider, v.occurred, picoText(v.payable), string(resolution), in.Note, in.By, now,
			txnID); err != nil {
			return wrapf(err, "invoicing: record the resolution")
		}
		earned, charged := RequestDollars(v.payable), RequestDollars(v.charge)
		summary := fmt.Sprintf("Released %s of earnings held on flagged request %s, paid on the provider's next statement",
			earned, in.RequestID)
		if in.Resolution == ResolutionClawBack {
			summary = fmt.Sprintf("Clawed back flagged request %s: %s taken from the provider's payable, %s credited to the customer",
				in.RequestID, earned, charged)
		}
		type state struct {
			Resolution Resolution    `json:"resolution"`
			Held       money.BigPico `json:"held_pico"`
			Charge     money.BigPico `json:"charge_pico"`
			Note       string        `json:"note,omitempty"`
			Txn        string        `json:"transaction_id,omitempty"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: in.By, Action: audit.ActionResolveFlag, SubjectKind: "request", SubjectID: in.RequestID,
			Summary: summary,
			Before:  state{Held: v.payable, Charge: v.charge},
			After:   state{Resolution: resolution, Held: v.payable, Charge: v.charge, Note: in.Note, Txn: out.TransactionID},
		})
	})
	if err != nil {
		return Resolved{}, err
	}
	return out, nil
}

// excess is the larger of what the rig reported beyond the bill and what the bill went
// beyond the response (when the response said), never below zero.
func excess(reported, billed int64, seen *int64) int64 {
	e := max(reported-billed, 0)
	if seen != nil {
		e = max(e, billed-*seen)
	}
	return e
}

// clawBackPostings take a request's earnings back from its provider's payable and give the
// customer back its charge, the platform's revenue giving up the rest (its margin). They sum
// to zero by construction.
func clawBackPostings(charge, earned money.BigPico, customer, payable, revenue ledger.LedgerAccountID) ([]ledger.Posting, error) {
	c, err := charge.Pico()
	if err != nil {
		return nil, err
	}
	e, err := earned.Pico()
	if err != nil {
		return nil, err
	}
	var postings []ledger.Posting
	if c != 0 {
		postings = append(postings, ledger.Posting{Account: customer, Amount: c})
	}
	if e != 0 {
		postings = append(postings, ledger.Posting{Account: payable, Amount: -e})
	}
	if rest := c - e; rest != 0 {
		postings = append(postings, ledger.Posting{Account: revenue, Amount: -rest})
	}
	return postings, nil
}

// RequestDollars writes a flagged request's amount as pages and notes show one request's
// cost: by money's one formatter, with the decimals it needs and at most six significant
// digits ("$0.0003852", "$1.575"), so that a request worth a fraction of a cent does not read
// as nothing.
func RequestDollars(b money.BigPico) string { return money.FormatPrecise(b) }
