package invoicing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// Flagged requests and their resolution (see docs/invoicing.md, "Flags and held earnings").
// A request is flagged with an excess when its rig reported more tokens than were billed, or
// was billed more than its response told the customer: the rig claimed money, and its
// earnings on the request are held out of its provider's statements until finance resolves
// the flag. Released, they are paid on the statement of the month of the release; clawed back,
// the provider's payable gives them up and the customer's credit gets back what the request
// was charged, the platform's revenue giving up its margin, in one ledger transaction.

// A usage row u is flagged with an excess when its rig claimed more than it was given, seen
// by the meter or by the gateway:
//   - meterExcess: the meter flagged it and the rig reported more tokens than were billed;
//   - gatewayExcess: the gateway's reconciliation flagged it (g, its gateway_requests row) and
//     the meter billed more tokens than the response told the customer.
//
// A row flagged without either (excess 0/0: billed within its bounds, the rig claiming no
// more, the response saying as much) puts no money at stake and is never held or flagged on a
// document.
const (
	meterExcess = `u.flag IS NOT NULL
	AND (u.reported_input_tokens > u.input_tokens OR u.reported_output_tokens > u.output_tokens)`
	gatewayExcess = `g.flagged_at IS NOT NULL AND (u.input_tokens > g.input_tokens OR u.output_tokens > g.output_tokens)`
)

// flaggedIDs is a query of the request ids of the usage rows flagged with an excess that
// match uCond (over u, usage_events) and, of those the gateway flagged, gCond too (over g and
// u): two halves, each on an index of flagged rows (the meter's, the gateway's).
func flaggedIDs(uCond, gCond string) string {
	return `SELECT u.request_id FROM usage_events u WHERE ` + meterExcess + ` AND ` + uCond + `
		UNION
		SELECT u.request_id FROM gateway_requests g JOIN usage_events u ON u.request_id = g.request_id
		WHERE ` + gatewayExcess + ` AND ` + uCond + ` AND ` + gCond
}

// periodFlags is flaggedIDs for a period's rows ($1 its start, $2 its end) of the parties in
// $3 (column party of both tables: account_id or provider_account_id; the gateway records the
// customer's account only).
func periodFlags(party string) string {
	gCond := `g.flagged_at >= $1`
	if party == "account_id" {
		gCond += ` AND g.account_id = ANY ($3::text[]::uuid[])`
	}
	return flaggedIDs(`u.metered_at >= $1 AND u.occurred_at >= $1 AND u.occurred_at < $2 AND u.`+party+` = ANY ($3::text[]::uuid[])`,
		gCond)
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
	where := []string{"true"}
	args := []any{f.Limit}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	if !f.Period.IsZero() {
		add("u.occurred_at >= $?", f.Period.Start())
		add("u.occurred_at < $?", f.Period.End())
		add("u.metered_at >= $?", f.Period.Start())
	}
	if f.AccountID != "" {
		if !isUUID(f.AccountID) {
			return []FlaggedRequest{}, nil
		}
		add("u.account_id = $?", f.AccountID)
	}
	if f.ProviderID != "" {
		if !isUUID(f.ProviderID) {
			return []FlaggedRequest{}, nil
		}
		add("u.provider_account_id = $?", f.ProviderID)
	}
	unresolved := "true"
	if f.Unresolved {
		unresolved = "r.request_id IS NULL"
	}
	cond := strings.Join(where, " AND ")
	rows, err := s.pool.Query(ctx, `
		SELECT u.request_id, u.occurred_at, u.account_id::text, a.name, u.provider_account_id::text, pa.name, u.model,
			coalesce(u.reported_input_tokens, u.input_tokens), coalesce(u.reported_output_tokens, u.output_tokens),
			u.input_tokens, u.output_tokens, g.input_tokens, g.output_tokens, coalesce(u.flag, ''),
			concat_ws('; ', g.flag_reason, u.flag_reason), u.charge_pico, u.payable_pico,
			coalesce(r.resolution, ''), r.resolved_at, coalesce(ur.email, ''), coalesce(r.note, ''),
			coalesce(r.transaction_id::text, '')
		FROM (`+flaggedIDs(cond, "true")+`) f
		JOIN usage_events u ON u.request_id = f.request_id
		JOIN accounts a ON a.id = u.account_id
		JOIN accounts pa ON pa.id = u.provider_account_id
		LEFT JOIN gateway_requests g ON g.request_id = u.request_id
		LEFT JOIN flag_resolutions r ON r.request_id = u.request_id
		LEFT JOIN users ur ON ur.id = r.resolved_by
		WHERE `+unresolved+`
		ORDER BY u.occurred_at DESC, u.request_id LIMIT $1`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FlaggedRequest, error) {
		var v FlaggedRequest
		err := r.Scan(&v.RequestID, &v.OccurredAt, &v.AccountID, &v.AccountName, &v.ProviderID, &v.ProviderName, &v.Model,
			&v.ReportedInput, &v.ReportedOutput, &v.BilledInput, &v.BilledOutput, &v.SeenInput, &v.SeenOutput, &v.MeterFlag,
			&v.Reason, &v.Charge, &v.Payable,
			&v.Resolution, &v.ResolvedAt, &v.ResolvedBy, &v.Note, &v.TransactionID)
		if err != nil {
			return v, err
		}
		v.ExcessInput, v.ExcessOutput = excess(v.ReportedInput, v.BilledInput, v.SeenInput), excess(v.ReportedOutput, v.BilledOutput, v.SeenOutput)
		v.Period = PeriodOf(v.OccurredAt)
		if v.Charged, err = CentsOf(v.Charge); err != nil {
			return v, err
		}
		v.Earned, err = CentsOf(v.Payable)
		return v, err
	})
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
	var v struct {
		account, provider, model string
		occurred                 time.Time
		charge, payable          money.BigPico
	}
	err = s.pool.QueryRow(ctx, `
		SELECT u.account_id::text, u.provider_account_id::text, u.model, u.occurred_at, u.charge_pico, u.payable_pico
		FROM usage_event_keys k
		JOIN usage_events u ON u.occurred_at = k.occurred_at AND u.request_id = k.request_id
		LEFT JOIN gateway_requests g ON g.request_id = u.request_id
		WHERE k.request_id = $1 AND ((`+meterExcess+`) OR (`+gatewayExcess+`))`, in.RequestID).Scan(
		&v.account, &v.provider, &v.model, &v.occurred, &v.charge, &v.payable)
	if errors.Is(err, pgx.ErrNoRows) {
		return Resolved{}, errFlagNotFound
	}
	if err != nil {
		return Resolved{}, err
	}
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
