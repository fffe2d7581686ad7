package invoicing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
)

// Voiding (see docs/invoicing.md, "Void and credit notes"). A voided invoice keeps its number
// and is cancelled by a credit note numbered after it (<number>-CN01, -CN02 for a second); a
// regenerated draft for the same account and period replaces it, linked to it and keeping its
// PO number. When the service was not delivered the credit note puts the invoice's total back
// on the customer's prepaid credit and takes each provider's share of it back from its
// payable, the platform's revenue giving up the rest, in one ledger transaction; for any other
// reason no money moves.

// MaxVoidNote bounds a void's note.
const MaxVoidNote = 500

// VoidInput voids an issued document.
type VoidInput struct {
	ID     string
	By     string // the finance user
	Reason VoidReason
	Note   string // required for VoidOther
	// PONumber, when set, is the regenerated invoice's PO number; nil keeps the voided one's.
	PONumber *string
}

// Voided is what a void made.
type Voided struct {
	// CreditNoteID and CreditNoteNumber name the credit note (none for a statement).
	CreditNoteID     string `json:"credit_note_id,omitempty"`
	CreditNoteNumber string `json:"credit_note_number,omitempty"`
	// Credited is what the credit note put back on the customer's credit.
	Credited money.BigPico `json:"credited_pico"`
	// RegeneratedID is the draft that replaces the voided document.
	RegeneratedID string `json:"regenerated_id"`
}

// validate checks the input against the reasons a kind of document takes.
func (in *VoidInput) validate(reasons []VoidReason) error {
	in.Note = strings.TrimSpace(in.Note)
	fe := services.FieldErrors{}
	if !slices.Contains(reasons, in.Reason) {
		names := make([]string, len(reasons))
		for i, r := range reasons {
			names[i] = string(r)
		}
		fe.Add("reason", "Choose why: "+strings.Join(names, ", ")+".")
	}
	if in.Reason == VoidOther && in.Note == "" {
		fe.Add("note", "Say what the reason is: it is kept with the credit note.")
	}
	if utf8.RuneCountInString(in.Note) > MaxVoidNote || len(in.Note) > 4*MaxVoidNote {
		fe.Add("note", fmt.Sprintf("Use at most %d characters.", MaxVoidNote))
	}
	// The note is printed on the credit note, a line break as a space.
	if hasControl(in.Note, true) {
		fe.Add("note", "Use letters, digits and punctuation only.")
	}
	if problem := unprintable(in.Note); problem != "" {
		fe.Add("note", problem)
	}
	if in.PONumber != nil {
		po := strings.TrimSpace(*in.PONumber)
		in.PONumber = &po
		if utf8.RuneCountInString(po) > MaxPONumber || hasControl(po, false) {
			fe.Add("po_number", fmt.Sprintf("Use at most %d characters on one line.", MaxPONumber))
		}
		if problem := unprintable(po); problem != "" {
			fe.Add("po_number", problem)
		}
	}
	if !isUUID(in.By) {
		fe.Add("by", "Documents are voided by a finance user.")
	}
	return fe.Err()
}

// VoidInvoice voids an issued or paid invoice: its credit note and the regenerated draft are
// made in one transaction with the void, and with the credit's ledger transaction when money
// moves. A second credit of money for the same account and period is refused: the first gave
// it back already.
func (s *Service) VoidInvoice(ctx context.Context, in VoidInput) (_ Voided, err error) {
	defer services.Wrap(&err, "invoicing.VoidInvoice(%s)", in.ID)
	if !isUUID(in.ID) {
		return Voided{}, errInvoiceNotFound
	}
	if err := in.validate(InvoiceVoidReasons); err != nil {
		return Voided{}, err
	}
	account, p, err := documentOwner(ctx, s, "invoices", "account_id", in.ID)
	if err != nil {
		return Voided{}, err
	}
	ac, err := s.newApproveContext(ctx)
	if err != nil {
		return Voided{}, err
	}
	bound, err := ac.bound(ctx, s.pool, p)
	if err != nil {
		return Voided{}, err
	}
	// The ledger accounts a credit posts to, looked up before the transaction (AccountFor uses
	// a connection of its own). An issued invoice's shares never change.
	var shares []providerShare
	var customer, revenue ledger.LedgerAccountID
	payables := map[string]ledger.LedgerAccountID{}
	if in.Reason.MovesMoney() {
		if shares, err = s.invoiceShares(ctx, in.ID); err != nil {
			return Voided{}, err
		}
		if customer, err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountCustomerCredit, account); err != nil {
			return Voided{}, err
		}
		if revenue, err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountPlatformRevenue, ""); err != nil {
			return Voided{}, err
		}
		for _, sh := range shares {
			if payables[sh.provider], err = s.cfg.Ledger.AccountFor(ctx, ledger.AccountProviderPayable, sh.provider); err != nil {
				return Voided{}, err
			}
		}
	}
	var out Voided
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockCustomer, []string{account}); err != nil {
			return err
		}
		var v struct {
			status         Status
			number, po     string
			total, due     Cents
			buyer, seller  [4]pgtype.Text
			accountName    string
			creditNotesNow int
		}
		if err := tx.QueryRow(ctx, `
			SELECT i.status, coalesce(i.number, ''), i.total_cents, i.amount_due_cents, coalesce(i.po_number, ''),
				i.buyer_legal_name, i.buyer_address, i.buyer_country, i.buyer_vat_id,
				i.seller_name, i.seller_address, i.seller_country, i.seller_vat_id,
				(SELECT count(*) FROM credit_notes c WHERE c.invoice_id = i.id)
			FROM invoices i WHERE i.id = $1 FOR UPDATE OF i`, in.ID).Scan(
			&v.status, &v.number, &v.total, &v.due, &v.po, &v.buyer[0], &v.buyer[1], &v.buyer[2], &v.buyer[3],
			&v.seller[0], &v.seller[1], &v.seller[2], &v.seller[3], &v.creditNotesNow); err != nil {
			return err
		}
		names, err := accounts.NamesByID(ctx, tx, []string{account})
		if err != nil {
			return err
		}
		v.accountName = names[account]
		if allowed := invoiceActions(v.status, v.due); !containsAction(allowed, ActionVoid) {
			return notAllowed("invoice", v.number, v.status, ActionVoid, allowed)
		}
		credit := money.BigPico{}
		if in.Reason.MovesMoney() {
			var earlier string
			err := tx.QueryRow(ctx, `SELECT number FROM credit_notes WHERE account_id = $1 AND period = $2 AND credited_pico > 0
				ORDER BY issued_at LIMIT 1`, account, p.Start()).Scan(&earlier)
			if err == nil {
				return services.Errorf(services.CodeConflict,
					"The usage of %s was credited already, by credit note %s; void this invoice for another reason.", p, earlier)
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if v.total > 0 {
				credit = v.total.BigPico()
			}
		}
		now := s.now().UTC()
		cnID, err := newID()
		if err != nil {
			return err
		}
		regenID, err := newID()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE invoices SET status = 'void', voided_at = $2, voided_by = $3, void_reason = $4,
			void_note = $5 WHERE id = $1`, in.ID, now, in.By, string(in.Reason), in.Note); err != nil {
			return wrapf(err, "invoicing: void the invoice")
		}
		po := v.po
		if in.PONumber != nil {
			po = *in.PONumber
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO invoices (id, account_id, period, status, replaces_invoice_id, total_cents, amount_due_cents,
				opening_balance_pico, purchases_pico, refunds_pico, adjustments_pico, credit_notes_pico, usage_charged_pico,
				closing_balance_pico, po_number, computed_at, created_at)
			VALUES ($1, $2, $3, 'draft', $4, 0, 0, 0, 0, 0, 0, 0, 0, 0, $5, $6, $6)`,
			regenID, account, p.Start(), in.ID, po, now); err != nil {
			return wrapf(err, "invoicing: the regenerated invoice")
		}

		var txnID pgtype.Text
		var clawbacks []Clawback
		if credit.Sign() > 0 {
			clawbacks = clawbacksOf(shares)
			postings, err := creditPostings(credit, clawbacks, customer, revenue, payables)
			if err != nil {
				return err
			}
			number := creditNoteNumber(v.number, v.creditNotesNow+1)
			txn, _, err := s.cfg.Ledger.PostTx(ctx, tx, ledger.TransactionInput{
				Kind: ledger.TransactionCreditNote, IdempotencyKey: "credit-note:" + cnID, CreatedBy: in.By, OccurredAt: now,
				Memo:     fmt.Sprintf("Credit note %s for invoice %s: %s", number, v.number, strings.ToLower(in.Reason.Text())),
				Postings: postings,
			})
			if err != nil {
				return err
			}
			txnID = pgtype.Text{String: txn.ID, Valid: true}
		}
		out = Voided{CreditNoteID: cnID, CreditNoteNumber: creditNoteNumber(v.number, v.creditNotesNow+1), Credited: credit,
			RegeneratedID: regenID}
		if _, err := tx.Exec(ctx, `
			INSERT INTO credit_notes (id, invoice_id, seq, number, account_id, period, reason, note, amount_cents, credited_pico,
				ledger_transaction_id, regenerated_invoice_id, po_number, buyer_legal_name, buyer_address, buyer_country,
				buyer_vat_id, seller_name, seller_address, seller_country, seller_vat_id, issued_at, issued_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::numeric, $11::uuid, $12, $13, $14, $15, $16, $17, $18, $19, $20,
				$21, $22, $23)`,
			cnID, in.ID, v.creditNotesNow+1, out.CreditNoteNumber, account, p.Start(), string(in.Reason), in.Note, int64(v.total),
			picoText(credit), txnID, regenID, v.po, v.buyer[0].String, v.buyer[1].String, v.buyer[2].String, v.buyer[3].String,
			v.seller[0].String, v.seller[1].String, v.seller[2].String, v.seller[3].String, now, in.By); err != nil {
			return wrapf(err, "invoicing: the credit note")
		}
		for _, c := range clawbacks {
			if _, err := tx.Exec(ctx, `INSERT INTO credit_note_clawbacks (credit_note_id, provider_account_id, amount_pico)
				VALUES ($1, $2, $3::numeric)`, cnID, c.ProviderAccountID, picoText(c.Amount)); err != nil {
				return err
			}
		}

		// The regenerated draft, computed as a close computes it: the credit note just made is
		// on it as a credit line.
		lateOpen, err := closed(ctx, tx, p.Prev())
		if err != nil {
			return err
		}
		inputs, err := loadCustomers(ctx, tx, p, lateOpen, bound, []string{account})
		if err != nil {
			return err
		}
		d, err := buildInvoice(p, inputs[account], ac.prices)
		if err != nil {
			return err
		}
		fixed := po
		if err := writeInvoices(ctx, tx, p, now, []pendingInvoice{{id: regenID, accountID: account, poNumber: &fixed,
			existed: true, d: d}}); err != nil {
			return err
		}
		type state struct {
			Status        Status        `json:"status"`
			Number        string        `json:"number"`
			Total         Cents         `json:"total_cents"`
			Reason        VoidReason    `json:"reason,omitempty"`
			CreditNote    string        `json:"credit_note,omitempty"`
			Credited      money.BigPico `json:"credited_pico"`
			Clawbacks     []Clawback    `json:"clawbacks,omitempty"`
			RegeneratedID string        `json:"regenerated_invoice_id,omitempty"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: in.By, Action: audit.ActionVoid, SubjectKind: "invoice", SubjectID: in.ID,
			Summary: fmt.Sprintf("Voided invoice %s of %s (%s) with credit note %s, crediting %s", v.number, v.accountName,
				in.Reason.Text(), out.CreditNoteNumber, credit),
			Before: state{Status: v.status, Number: v.number, Total: v.total},
			After: state{Status: StatusVoid, Number: v.number, Total: v.total, Reason: in.Reason, CreditNote: out.CreditNoteNumber,
				Credited: credit, Clawbacks: clawbacks, RegeneratedID: regenID},
		})
	})
	if err != nil {
		return Voided{}, err
	}
	return out, nil
}

// invoiceShares reads what an invoice's usage owes each provider, over every period its lines
// bill.
func (s *Service) invoiceShares(ctx context.Context, id string) ([]providerShare, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT provider_account_id::text, sum(charge_pico), sum(payable_pico) FROM invoice_provider_shares
		WHERE invoice_id = $1 GROUP BY 1 ORDER BY 1`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (providerShare, error) {
		var sh providerShare
		err := r.Scan(&sh.provider, &sh.charge, &sh.payable)
		return sh, err
	})
}

// clawbacksOf are what a credit takes back from each provider: its share of the credited
// usage (all of it: a credit gives back the whole invoice).
func clawbacksOf(shares []providerShare) []Clawback {
	var out []Clawback
	for _, sh := range shares {
		if sh.payable.Sign() > 0 {
			out = append(out, Clawback{ProviderAccountID: sh.provider, Amount: sh.payable})
		}
	}
	return out
}

// creditPostings are a credit's ledger postings: the customer's credit up by the credit, each
// provider's payable down by its share, the platform's revenue down by the rest. They sum to
// zero by construction.
func creditPostings(credit money.BigPico, clawbacks []Clawback, customer, revenue ledger.LedgerAccountID,
	payables map[string]ledger.LedgerAccountID) ([]ledger.Posting, error) {
	c, err := credit.Pico()
	if err != nil {
		return nil, err
	}
	postings := []ledger.Posting{{Account: customer, Amount: c}}
	rest := c
	for _, cb := range clawbacks {
		a, err := cb.Amount.Pico()
		if err != nil {
			return nil, err
		}
		postings = append(postings, ledger.Posting{Account: payables[cb.ProviderAccountID], Amount: -a})
		if rest, err = rest.Add(-a); err != nil {
			return nil, err
		}
	}
	if rest != 0 {
		postings = append(postings, ledger.Posting{Account: revenue, Amount: -rest})
	}
	return postings, nil
}

// VoidStatement voids an issued statement that has not been paid out and that no later
// statement of its provider carries on from; a regenerated draft replaces it. No money moves:
// nothing was paid.
func (s *Service) VoidStatement(ctx context.Context, in VoidInput) (_ Voided, err error) {
	defer services.Wrap(&err, "invoicing.VoidStatement(%s)", in.ID)
	if !isUUID(in.ID) {
		return Voided{}, errStatementNotFound
	}
	in.PONumber = nil
	if err := in.validate(StatementVoidReasons); err != nil {
		return Voided{}, err
	}
	provider, p, err := documentOwner(ctx, s, "statements", "provider_account_id", in.ID)
	if err != nil {
		return Voided{}, err
	}
	ac, err := s.newApproveContext(ctx)
	if err != nil {
		return Voided{}, err
	}
	bound, err := ac.bound(ctx, s.pool, p)
	if err != nil {
		return Voided{}, err
	}
	var out Voided
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockAccounts(ctx, tx, lockProvider, []string{provider}); err != nil {
			return err
		}
		// The statement's payout may be under way: the payable's lock orders this void with
		// the payout's check, so that one of them sees the other (see lockPayable).
		if err := s.lockPayable(ctx, tx, provider); err != nil {
			return err
		}
		var status Status
		var number, name string
		var payout Cents
		var later, underway bool
		if err := tx.QueryRow(ctx, `SELECT s.status, coalesce(s.number, ''), s.payout_cents, `+laterIssued+`
			FROM statements s WHERE s.id = $1 FOR UPDATE OF s`, in.ID).Scan(&status, &number, &payout, &later); err != nil {
			return err
		}
		var err error
		if underway, err = statementPayoutUnderway(ctx, tx, in.ID); err != nil {
			return err
		}
		names, err := accounts.NamesByID(ctx, tx, []string{provider})
		if err != nil {
			return err
		}
		name = names[provider]
		if underway && status == StatusIssued {
			return services.Errorf(services.CodeConflict,
				"Statement %s's payout is under way through Stripe, and money may be leaving for it: it cannot be voided until the payout's outcome is known.",
				displayNumber(number))
		}
		if allowed := statementActions(status, payout, later, underway); !containsAction(allowed, ActionVoid) {
			return notAllowed("statement", number, status, ActionVoid, allowed)
		}
		now := s.now().UTC()
		regenID, err := newID()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE statements SET status = 'void', voided_at = $2, voided_by = $3, void_reason = $4,
			void_note = $5 WHERE id = $1`, in.ID, now, in.By, string(in.Reason), in.Note); err != nil {
			return wrapf(err, "invoicing: void the statement")
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO statements (id, provider_account_id, period, status, replaces_statement_id, earnings_cents,
				late_earnings_cents, clawbacks_cents, carried_in_cents, net_cents, payout_cents, carried_out_cents,
				minimum_payout_cents, opening_payable_pico, usage_posted_pico, credit_notes_posted_pico, payouts_posted_pico,
				other_posted_pico, closing_payable_pico, computed_at, created_at)
			VALUES ($1, $2, $3, 'draft', $4, 0, 0, 0, 0, 0, 0, 0, $5, 0, 0, 0, 0, 0, 0, $6, $6)`,
			regenID, provider, p.Start(), in.ID, int64(s.cfg.MinimumPayout), now); err != nil {
			return wrapf(err, "invoicing: the regenerated statement")
		}
		lateOpen, err := closed(ctx, tx, p.Prev())
		if err != nil {
			return err
		}
		inputs, err := loadProviders(ctx, tx, p, lateOpen, bound, []string{provider})
		if err != nil {
			return err
		}
		d, err := buildStatement(p, inputs[provider], s.cfg.MinimumPayout)
		if err != nil {
			return err
		}
		if err := writeStatements(ctx, tx, p, now, s.cfg.MinimumPayout, []pendingStatement{{id: regenID, providerID: provider,
			existed: true, d: d}}); err != nil {
			return err
		}
		out = Voided{RegeneratedID: regenID}
		type state struct {
			Status        Status     `json:"status"`
			Number        string     `json:"number"`
			Reason        VoidReason `json:"reason,omitempty"`
			RegeneratedID string     `json:"regenerated_statement_id,omitempty"`
		}
		return s.cfg.Audit.RecordTx(ctx, tx, audit.Record{
			ActorID: in.By, Action: audit.ActionVoid, SubjectKind: "statement", SubjectID: in.ID,
			Summary: fmt.Sprintf("Voided statement %s of %s (%s)", number, name, in.Reason.Text()),
			Before:  state{Status: status, Number: number},
			After:   state{Status: StatusVoid, Number: number, Reason: in.Reason, RegeneratedID: regenID},
		})
	})
	if err != nil {
		return Voided{}, err
	}
	return out, nil
}
