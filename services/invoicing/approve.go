package invoicing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/payouts"
)

// Approval finalises drafts (see docs/invoicing.md, "Review and numbers"): each is computed
// again in its own transaction, under its account's lock, so that usage metered since the
// close lands on it; then numbered, stamped with the buyer's and the seller's details of the
// moment, issued, and recorded in the audit log. One approval's failure leaves the others
// approved.

// Approved is the outcome of approving one draft.
type Approved struct {
	ID     string `json:"id"`
	Number string `json:"number,omitempty"`
	Total  Cents  `json:"total_cents"`
	Err    error  `json:"-"`
	// Problem is Err's message for the user, "" when approved.
	Problem string `json:"problem,omitempty"`
	// Payout is the payout of an approved statement that pays out, as its attempt left it
	// (paid, or failed with its reason); nil for an invoice, a statement that carries over,
	// or where no payer is wired. PayoutErr is why it did not pay, PayoutProblem its message
	// for the user; the approval stands either way.
	Payout        *payouts.Payout `json:"payout,omitempty"`
	PayoutErr     error           `json:"-"`
	PayoutProblem string          `json:"payout_problem,omitempty"`
}

// approveContext is what approving several drafts reads once.
type approveContext struct {
	prices map[int64]price
	bounds map[Period]int64
	// confirmed holds, per id, the figure a person confirmed: an invoice's total, a statement's
	// payout. A draft whose figure computed again differs is refused (see Confirmed); nil
	// approves at whatever the figures now are.
	confirmed map[string]Cents
}

// Confirmed is a draft to approve with the figure its approver was shown and confirmed: an
// invoice's total, or a statement's payout, in cents. An approval with it issues the draft
// only while that figure, computed again at approval, is unchanged; otherwise it is refused
// with the new figure and nothing is issued or paid (docs/web-security.md, "Confirming what
// moves money").
type Confirmed struct {
	ID    string
	Cents Cents
}

// checkConfirmed refuses the draft id when its figure computed now is not the one confirmed.
func (a *approveContext) checkConfirmed(kind, id string, now Cents, what string) error {
	if a.confirmed == nil {
		return nil
	}
	if want := a.confirmed[id]; want != now {
		return services.Errorf(services.CodeConflict,
			"The %s of this %s is now %s, not the %s confirmed: nothing was approved or paid. Confirm the new figure.",
			what, kind, now, want)
	}
	return nil
}

func confirmedIDs(list []Confirmed) ([]string, map[string]Cents) {
	ids, m := make([]string, len(list)), make(map[string]Cents, len(list))
	for i, c := range list {
		ids[i], m[c.ID] = c.ID, c.Cents
	}
	return ids, m
}

func (s *Service) newApproveContext(ctx context.Context) (*approveContext, error) {
	prices, err := loadPrices(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	return &approveContext{prices: prices, bounds: map[Period]int64{}}, nil
}

// bound is the ledger bound of the period's start, read once per call.
func (a *approveContext) bound(ctx context.Context, q querier, p Period) (int64, error) {
	if b, ok := a.bounds[p]; ok {
		return b, nil
	}
	b, err := ledgerBound(ctx, q, p.Start())
	if err == nil {
		a.bounds[p] = b
	}
	return b, err
}

// ApproveInvoices approves the drafts by the finance user by, each on its own; the result
// says, per id in order, the number it was issued with or why it was not.
func (s *Service) ApproveInvoices(ctx context.Context, by string, ids []string) ([]Approved, error) {
	return s.approveInvoices(ctx, by, ids, nil)
}

// ApproveConfirmedInvoices approves as ApproveInvoices, each draft only at the total it was
// confirmed at.
func (s *Service) ApproveConfirmedInvoices(ctx context.Context, by string, list []Confirmed) ([]Approved, error) {
	ids, confirmed := confirmedIDs(list)
	return s.approveInvoices(ctx, by, ids, confirmed)
}

func (s *Service) approveInvoices(ctx context.Context, by string, ids []string, confirmed map[string]Cents) ([]Approved, error) {
	if err := s.checkApprover(by); err != nil {
		return nil, err
	}
	ac, err := s.newApproveContext(ctx)
	if err != nil {
		return nil, err
	}
	ac.confirmed = confirmed
	out := make([]Approved, len(ids))
	for i, id := range ids {
		if err := s.approveInvoice(ctx, ac, by, id, &out[i]); err != nil {
			out[i] = Approved{ID: id, Err: err, Problem: problemOf(err)}
		}
	}
	return out, nil
}

// checkApprover refuses an approval without a user or while the seller's details are missing.
func (s *Service) checkApprover(by string) error {
	if !isUUID(by) {
		return services.Errorf(services.CodeInvalid, "Documents are approved by a finance user.")
	}
	if !s.cfg.Seller.Complete() {
		return services.Errorf(services.CodeUnavailable,
			"The seller's details are not set, and a document cannot be issued without them: set GPUMARKET_SELLER_NAME, GPUMARKET_SELLER_ADDRESS and GPUMARKET_SELLER_COUNTRY.")
	}
	return nil
}

// problemOf is what a user is told of an error: its message when it is the application's.
func problemOf(err error) string {
	if err == nil {
		return ""
	}
	var e *services.Error
	if errors.As(err, &e) && e.Code != services.CodeInternal {
		return e.Message
	}
	return "Internal error."
}

func (s *Service) approveInvoice(ctx context.Context, ac *approveContext, by, id string, res *Approved) (err error) {
	defer services.Wrap(&err, "invoicing.ApproveInvoice(%s)", id)
	if !isUUID(id) {
		return errInvoiceNotFound
	}
	account, p, err := documentOwner(ctx, s, "invoices", "account_id", id)
	if err != nil {
		return err
	}
	bound, err := ac.bound(ctx, s.pool, p)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockCustomer, []string{account}); err != nil {
			return err
		}
		var status Status
		var number string
		var due, totalBefore Cents
		var flags []string
		if err := tx.QueryRow(ctx, `SELECT status, coalesce(number, ''), amount_due_cents, total_cents, flags
			FROM invoices WHERE id = $1 FOR UPDATE`, id).Scan(&status, &number, &due, &totalBefore, &flags); err != nil {
			return err
		}
		if status != StatusDraft {
			return notAllowed("invoice", number, status, ActionApprove, invoiceActions(status, due))
		}
		lateOpen, err := closed(ctx, tx, p.Prev())
		if err != nil {
			return err
		}
		inputs, err := loadCustomers(ctx, tx, p, lateOpen, bound, []string{account})
		if err != nil {
			return err
		}
		in := inputs[account]
		d, err := buildInvoice(p, in, ac.prices)
		if err != nil {
			return err
		}
		if err := ac.checkConfirmed("invoice", id, d.total, "total"); err != nil {
			return err
		}
		// A usage mismatch found by an exact check stays on the draft as it is issued.
		if containsFlag(flags, FlagUsageMismatch) {
			d.flags = appendFlag(d.flags, FlagUsageMismatch)
			d.notes[FlagUsageMismatch] = mismatchNote
		}
		w := pendingInvoice{id: id, accountID: account, existed: true, d: d}
		if in.current != nil {
			w.poNumber = in.current.poNumber
		}
		now := s.now().UTC()
		if err := writeInvoices(ctx, tx, p, now, []pendingInvoice{w}); err != nil {
			return err
		}
		seq, err := nextNumber(ctx, tx, seriesInvoice, now.Year(), s.cfg.InvoiceNumbers.First())
		if err != nil {
			return err
		}
		number = s.cfg.InvoiceNumbers.Number(now.Year(), seq)
		buyer, seller := in.details.Party, s.cfg.Seller
		if _, err := tx.Exec(ctx, `
			UPDATE invoices SET status = 'issued', number = $2, number_year = $3, number_seq = $4, issued_at = $5,
				issued_by = $6, po_number = coalesce(po_number, $7), buyer_legal_name = $8, buyer_address = $9,
				buyer_country = $10, buyer_vat_id = $11, seller_name = $12, seller_address = $13, seller_country = $14,
				seller_vat_id = $15
			WHERE id = $1`, id, number, now.Year(), seq, now, by, in.details.PONumber, buyer.LegalName, buyer.Address,
			buyer.Country, buyer.VATID, seller.LegalName, seller.Address, seller.Country, seller.VATID); err != nil {
			return wrapf(err, "invoicing: issue the invoice")
		}
		*res = Approved{ID: id, Number: number, Total: d.total}
		if s.cfg.Events != nil {
			if err := s.cfg.Events.Emit(ctx, tx, account, EventInvoiceIssued, EventInvoiceIssued+":"+id, InvoiceIssued{
				InvoiceID: id, Number: number, Period: p.String(), Currency: "usd",
				TotalCents: d.total, TotalUSD: d.total.Decimal(), AmountDueCents: d.due, AmountDueUSD: d.due.Decimal(),
				IssuedAt: now,
			}); err != nil {
				return err
			}
		}
		if err := s.mailInvoice(ctx, tx, id, account); err != nil {
			return err
		}
		type state struct {
			Status Status `json:"status"`
			Number string `json:"number,omitempty"`
			Total  Cents  `json:"total_cents"`
			Due    Cents  `json:"amount_due_cents"`
			Flags  []Flag `json:"flags"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: by, Action: audit.ActionApprove, SubjectKind: "invoice", SubjectID: id,
			Summary: fmt.Sprintf("Issued invoice %s to %s for %s: %s", number, in.accountName, p, d.total),
			Before:  state{Status: StatusDraft, Total: totalBefore, Due: due, Flags: flagsOf(flags)},
			After:   state{Status: StatusIssued, Number: number, Total: d.total, Due: d.due, Flags: d.flags},
		})
	})
}

// ApproveStatements approves statement drafts as ApproveInvoices approves invoices. A
// statement is approved only once its provider's previous statement is: it carries on from
// that one. Each approved statement that pays out is then paid through the payer, once its
// approval has committed (see docs/invoicing.md, "Paying statements"); the result says how.
func (s *Service) ApproveStatements(ctx context.Context, by string, ids []string) ([]Approved, error) {
	return s.approveStatements(ctx, by, ids, nil)
}

// ApproveConfirmedStatements approves as ApproveStatements, each draft only while the payout
// it computes to is the one confirmed: a statement whose payout changed since is refused,
// and nothing of it is issued or transferred.
func (s *Service) ApproveConfirmedStatements(ctx context.Context, by string, list []Confirmed) ([]Approved, error) {
	ids, confirmed := confirmedIDs(list)
	return s.approveStatements(ctx, by, ids, confirmed)
}

// PaysOut reports whether approving a statement that pays out sends its payout (a payer is
// wired), rather than leaving it to be paid by hand.
func (s *Service) PaysOut() bool { return s.payer != nil }

func (s *Service) approveStatements(ctx context.Context, by string, ids []string, confirmed map[string]Cents) ([]Approved, error) {
	if err := s.checkApprover(by); err != nil {
		return nil, err
	}
	ac, err := s.newApproveContext(ctx)
	if err != nil {
		return nil, err
	}
	ac.confirmed = confirmed
	out := make([]Approved, len(ids))
	for i, id := range ids {
		st, err := s.approveStatement(ctx, ac, by, id, &out[i])
		if err != nil {
			out[i] = Approved{ID: id, Err: err, Problem: problemOf(err)}
			continue
		}
		if st.payout > 0 && s.payer != nil {
			s.payOut(ctx, by, st, &out[i])
		}
	}
	return out, nil
}

// approveStatement issues a statement draft and returns it as its payout pays it.
func (s *Service) approveStatement(ctx context.Context, ac *approveContext, by, id string, res *Approved) (_ payableStatement, err error) {
	defer services.Wrap(&err, "invoicing.ApproveStatement(%s)", id)
	if !isUUID(id) {
		return payableStatement{}, errStatementNotFound
	}
	provider, p, err := documentOwner(ctx, s, "statements", "provider_account_id", id)
	if err != nil {
		return payableStatement{}, err
	}
	bound, err := ac.bound(ctx, s.pool, p)
	if err != nil {
		return payableStatement{}, err
	}
	var issued payableStatement
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockProvider, []string{provider}); err != nil {
			return err
		}
		var status Status
		var number string
		var payout, netBefore Cents
		if err := tx.QueryRow(ctx, `SELECT status, coalesce(number, ''), payout_cents, net_cents FROM statements
			WHERE id = $1 FOR UPDATE`, id).Scan(&status, &number, &payout, &netBefore); err != nil {
			return err
		}
		if status != StatusDraft {
			return notAllowed("statement", number, status, ActionApprove, statementActions(status, payout, true, false))
		}
		lateOpen, err := closed(ctx, tx, p.Prev())
		if err != nil {
			return err
		}
		inputs, err := loadProviders(ctx, tx, p, lateOpen, bound, []string{provider})
		if err != nil {
			return err
		}
		in := inputs[provider]
		if prev := in.previous; prev != nil && prev.status == StatusDraft {
			return services.Errorf(services.CodeConflict,
				"Approve %s's statement for %s first: this one carries on from it.", in.providerName, prev.period)
		}
		d, err := buildStatement(p, in, s.cfg.MinimumPayout)
		if err != nil {
			return err
		}
		if err := ac.checkConfirmed("statement", id, d.payout, "payout"); err != nil {
			return err
		}
		now := s.now().UTC()
		if err := writeStatements(ctx, tx, p, now, s.cfg.MinimumPayout, []pendingStatement{{id: id, providerID: provider, existed: true, d: d}}); err != nil {
			return err
		}
		seq, err := nextNumber(ctx, tx, seriesStatement, now.Year(), s.cfg.StatementNumbers.First())
		if err != nil {
			return err
		}
		number = s.cfg.StatementNumbers.Number(now.Year(), seq)
		payee, payer := in.details.Party, s.cfg.Seller
		if _, err := tx.Exec(ctx, `
			UPDATE statements SET status = 'issued', number = $2, number_year = $3, number_seq = $4, issued_at = $5,
				issued_by = $6, payee_legal_name = $7, payee_address = $8, payee_country = $9, payee_vat_id = $10,
				payer_name = $11, payer_address = $12, payer_country = $13, payer_vat_id = $14
			WHERE id = $1`, id, number, now.Year(), seq, now, by, payee.LegalName, payee.Address, payee.Country, payee.VATID,
			payer.LegalName, payer.Address, payer.Country, payer.VATID); err != nil {
			return wrapf(err, "invoicing: issue the statement")
		}
		*res = Approved{ID: id, Number: number, Total: d.net}
		issued = payableStatement{id: id, providerID: provider, number: number, period: p, payout: d.payout}
		type state struct {
			Status  Status `json:"status"`
			Number  string `json:"number,omitempty"`
			Net     Cents  `json:"net_cents"`
			Payout  Cents  `json:"payout_cents"`
			Carried Cents  `json:"carried_out_cents"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: by, Action: audit.ActionApprove, SubjectKind: "statement", SubjectID: id,
			Summary: fmt.Sprintf("Issued statement %s to %s for %s: %s to pay out, %s carried over", number, in.providerName, p,
				d.payout, d.carried),
			Before: state{Status: StatusDraft, Net: netBefore, Payout: payout},
			After:  state{Status: StatusIssued, Number: number, Net: d.net, Payout: d.payout, Carried: d.carried},
		})
	})
	return issued, err
}

// documentOwner reads whose document id is and its period.
func documentOwner(ctx context.Context, s *Service, table, ownerColumn, id string) (string, Period, error) {
	var owner string
	var period time.Time
	err := s.pool.QueryRow(ctx, `SELECT `+ownerColumn+`::text, period FROM `+table+` WHERE id = $1`, id).Scan(&owner, &period)
	if errors.Is(err, pgx.ErrNoRows) {
		if table == "invoices" {
			return "", Period{}, errInvoiceNotFound
		}
		return "", Period{}, errStatementNotFound
	}
	return owner, periodOfDate(period), err
}

// closed reports whether the period's close has run: its late usage then goes on the next
// period's documents.
func closed(ctx context.Context, q querier, p Period) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM invoice_closes WHERE period = $1)`, p.Start()).Scan(&ok)
	return ok, err
}

func containsFlag(flags []string, f Flag) bool {
	for _, x := range flags {
		if x == string(f) {
			return true
		}
	}
	return false
}

// MarkInvoicePaid records the payment of an issued invoice with an amount due, by the finance
// user by; reference says how it was paid (a bank transfer's reference). The payment itself
// is the ledger's: money received outside Stripe is recorded as an adjustment.
func (s *Service) MarkInvoicePaid(ctx context.Context, by, id, reference string) (err error) {
	defer services.Wrap(&err, "invoicing.MarkInvoicePaid(%s)", id)
	return s.markPaid(ctx, "invoice", by, id, reference)
}

// MarkStatementPaid records the payout of an issued statement, by the user by (the payout's
// author); reference names the transfer.
func (s *Service) MarkStatementPaid(ctx context.Context, by, id, reference string) (err error) {
	defer services.Wrap(&err, "invoicing.MarkStatementPaid(%s)", id)
	return s.markPaid(ctx, "statement", by, id, reference)
}

func (s *Service) markPaid(ctx context.Context, kind, by, id, reference string) error {
	reference = strings.TrimSpace(reference)
	if !isUUID(by) {
		return services.Errorf(services.CodeInvalid, "A payment is recorded by a finance user.")
	}
	if len(reference) > 200 {
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"reference": "Use at most 200 characters."}}
	}
	table, amountColumn, notFound := "invoices", "amount_due_cents", errInvoiceNotFound
	if kind == "statement" {
		table, amountColumn, notFound = "statements", "payout_cents", errStatementNotFound
	}
	if !isUUID(id) {
		return notFound
	}
	var provider string
	if kind == "statement" {
		var err error
		if provider, _, err = documentOwner(ctx, s, "statements", "provider_account_id", id); err != nil {
			return err
		}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A statement's payout may be under way: the payable's lock orders this with the
		// payout's check (see lockPayable).
		if kind == "statement" {
			if err := s.lockPayable(ctx, tx, provider); err != nil {
				return err
			}
		}
		var status Status
		var number string
		var amount Cents
		err := tx.QueryRow(ctx, `SELECT status, coalesce(number, ''), `+amountColumn+` FROM `+table+`
			WHERE id = $1 FOR UPDATE`, id).Scan(&status, &number, &amount)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound
		}
		if err != nil {
			return err
		}
		allowed := invoiceActions(status, amount)
		if kind == "statement" {
			underway, err := statementPayoutUnderway(ctx, tx, id)
			if err != nil {
				return err
			}
			allowed = statementActions(status, amount, true, underway)
			if underway && status == StatusIssued {
				return services.Errorf(services.CodeConflict,
					"Statement %s's payout is under way through Stripe: its outcome is recorded when it ends, and it cannot be marked paid by hand meanwhile.",
					displayNumber(number))
			}
		}
		if !containsAction(allowed, ActionMarkPaid) {
			return notAllowed(kind, number, status, ActionMarkPaid, allowed)
		}
		now := s.now().UTC()
		if _, err := tx.Exec(ctx, `UPDATE `+table+` SET status = 'paid', paid_at = $2, paid_by = $3, payment_reference = $4
			WHERE id = $1`, id, now, by, reference); err != nil {
			return err
		}
		type state struct {
			Status    Status `json:"status"`
			Amount    Cents  `json:"amount_cents"`
			Reference string `json:"reference,omitempty"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: by, Action: audit.ActionMarkPaid, SubjectKind: kind, SubjectID: id,
			Summary: fmt.Sprintf("Recorded %s %s as paid: %s", kind, number, amount),
			Before:  state{Status: status, Amount: amount}, After: state{Status: StatusPaid, Amount: amount, Reference: reference},
		})
	})
}

func containsAction(actions []Action, a Action) bool {
	for _, x := range actions {
		if x == a {
			return true
		}
	}
	return false
}

// EventInvoiceIssued is the webhook event of an invoice issued to its customer.
const EventInvoiceIssued = "invoice.issued"

// InvoiceIssued is the data of an invoice.issued event: amounts in cents and as decimal dollars.
type InvoiceIssued struct {
	InvoiceID      string    `json:"invoice_id"`
	Number         string    `json:"number"`
	Period         string    `json:"period"` // "YYYY-MM"
	Currency       string    `json:"currency"`
	TotalCents     Cents     `json:"total_cents"`
	TotalUSD       string    `json:"total_usd"`
	AmountDueCents Cents     `json:"amount_due_cents"`
	AmountDueUSD   string    `json:"amount_due_usd"`
	IssuedAt       time.Time `json:"issued_at"`
}
