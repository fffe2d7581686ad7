package invoicing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
)

// Reading what documents are computed from. Every query reads a chunk of accounts (or
// providers) by id through an index that starts with the id, so that a chunk costs what its
// accounts hold, not what the period holds; a close reads its accounts chunk by chunk.

// querier is a transaction or the pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ledgerBound is the ledger's bound of the postings of the transactions that occurred at or
// after t (ledger.QueuePostingBound), from which a document's balances read the postings. It
// is computed afresh by each operation (a close, an approval).
func ledgerBound(ctx context.Context, q querier, t time.Time) (int64, error) {
	var bound int64
	b := &pgx.Batch{}
	ledger.QueuePostingBound(b, t, &bound)
	return bound, wrapf(q.SendBatch(ctx, b).Close(), "invoicing: where the ledger's postings of %s start", t.Format(time.RFC3339))
}

// loadPrices reads the whole price book (catalog.ReadPriceBook): a few rows per price change.
func loadPrices(ctx context.Context, q querier) (map[int64]price, error) {
	book, err := catalog.ReadPriceBook(ctx, q)
	if err != nil {
		return nil, wrapf(err, "invoicing: read the price book")
	}
	out := map[int64]price{}
	for _, rows := range book {
		for _, p := range rows {
			out[p.ID] = price{input: p.Input, output: p.Output, cached: p.CachedInput, from: p.EffectiveFrom.UTC(), model: p.Model}
		}
	}
	return out, nil
}

// sendAny sends the batch through q when anything is queued on it.
func sendAny(ctx context.Context, q querier, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return q.SendBatch(ctx, b).Close()
}

// sumsOf are the rollups' sums as a document's lines add them.
func sumsOf(r metering.RollupSums) usageSums {
	return usageSums{requests: r.Requests, input: r.InputTokens, output: r.OutputTokens, unchargedRequests: r.UnchargedRequests,
		unchargedInput: r.UnchargedInputTokens, unchargedOutput: r.UnchargedOutputTokens, charge: r.Charge, payable: r.Payable,
		cached: r.CachedInputTokens, unchargedCached: r.UnchargedCachedInputTokens}
}

// scanSums reads the sums a query writes as requests, input, output, uncharged requests,
// uncharged input, uncharged output, charge, payable, cached input, uncharged cached input.
func sumsTargets(s *usageSums) []any {
	return []any{&s.requests, &s.input, &s.output, &s.unchargedRequests, &s.unchargedInput, &s.unchargedOutput, &s.charge, &s.payable,
		&s.cached, &s.unchargedCached}
}

// queueLedger queues the read of the owners' ledger accounts of a kind with their movements
// since the period began (ledger.QueuePeriodMovements), and fills figures per owner.
func queueLedger(b *pgx.Batch, kind ledger.AccountKind, owners []string, bound int64, p Period, figures func(owner string) *ledgerFigures) {
	ledger.QueuePeriodMovements(b, kind, owners, bound, p.Start(), p.End(), func(m ledger.PeriodMovement) {
		f := figures(m.Owner)
		f.balance = m.Balance
		if !m.Moved {
			return // no movement since the period began
		}
		f.sinceStart = f.sinceStart.Add(m.Amount)
		if !m.InPeriod {
			f.sinceEnd = f.sinceEnd.Add(m.Amount)
			return
		}
		if f.byKind == nil {
			f.byKind = map[string]money.BigPico{}
		}
		f.byKind[string(m.Kind)] = f.byKind[string(m.Kind)].Add(m.Amount)
		if m.TransactionID != "" {
			f.entries = append(f.entries, ledgerEntry{LedgerEntry: LedgerEntry{TransactionID: m.TransactionID, Kind: string(m.Kind),
				Memo: m.Memo, OccurredAt: m.OccurredAt.UTC(), Amount: m.Amount}})
		}
	})
}

// loadCustomers reads the inputs of the accounts' invoices for period p. lateOpen says
// whether the period before was closed, so that its late usage may be carried.
func loadCustomers(ctx context.Context, q querier, p Period, lateOpen bool, bound int64, ids []string) (map[string]*customerInputs, error) {
	out := make(map[string]*customerInputs, len(ids))
	for _, id := range ids {
		out[id] = &customerInputs{accountID: id, usage: newByPeriod[usageKey](), invoiced: newByPeriod[usageKey](),
			shares: newByPeriod[string](), sharesBy: newByPeriod[string]()}
	}
	get := func(id string) *customerInputs {
		in := out[id]
		if in == nil { // an id the query matched that was not asked for: impossible, but harmless
			in = &customerInputs{accountID: id, usage: newByPeriod[usageKey](), invoiced: newByPeriod[usageKey](),
				shares: newByPeriod[string](), sharesBy: newByPeriod[string]()}
			out[id] = in
		}
		return in
	}
	from := p.Start()
	if lateOpen {
		from = p.Prev().Start()
	}
	b := &pgx.Batch{}
	// The rollups per line and per provider, in one pass over the accounts' rows.
	metering.QueueCustomerRollups(b, ids, from, p.Start(), p.End(), func(r metering.CustomerRollup) {
		in := get(r.AccountID)
		if r.ByProvider {
			in.shares.add(r.Current, r.ProviderID, sumsOf(r.Sums))
		} else {
			in.usage.add(r.Current, usageKey{tier: r.Tier, model: r.Model, priceID: r.PriceID}, sumsOf(r.Sums))
		}
	})
	// What issued invoices billed of the same usage.
	b.Queue(`
		SELECT i.account_id::text, l.usage_period = $2, l.tier, l.model, l.price_id, sum(l.requests)::bigint,
			sum(l.input_tokens)::bigint, sum(l.output_tokens)::bigint, sum(l.uncharged_requests)::bigint,
			sum(l.uncharged_input_tokens)::bigint, sum(l.uncharged_output_tokens)::bigint, sum(l.charge_pico), sum(l.payable_pico),
			sum(l.cached_input_tokens)::bigint, sum(l.uncharged_cached_input_tokens)::bigint
		FROM invoices i JOIN invoice_lines l ON l.invoice_id = i.id
		WHERE i.account_id = ANY ($3::text[]::uuid[]) AND i.status IN ('issued', 'paid')
			AND l.kind IN ('usage', 'late_usage') AND l.usage_period >= $1 AND l.usage_period <= $2
		GROUP BY 1, 2, 3, 4, 5`, from, p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var current bool
			var k usageKey
			var s usageSums
			if err := rows.Scan(append([]any{&id, &current, &k.tier, &k.model, &k.priceID}, sumsTargets(&s)...)...); err != nil {
				return err
			}
			get(id).invoiced.add(current, k, s)
		}
		return rows.Err()
	})
	b.Queue(`
		SELECT i.account_id::text, s.usage_period = $2, s.provider_account_id::text, sum(s.charge_pico), sum(s.payable_pico)
		FROM invoices i JOIN invoice_provider_shares s ON s.invoice_id = i.id
		WHERE i.account_id = ANY ($3::text[]::uuid[]) AND i.status IN ('issued', 'paid')
			AND s.usage_period >= $1 AND s.usage_period <= $2
		GROUP BY 1, 2, 3`, from, p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, provider string
			var current bool
			var s usageSums
			if err := rows.Scan(&id, &current, &provider, &s.charge, &s.payable); err != nil {
				return err
			}
			get(id).sharesBy.add(current, provider, s)
		}
		return rows.Err()
	})
	// The accounts' invoices of the period and the one before that are not void, and the
	// total of the one before for the spike flag.
	drafts := map[string]bool{} // accounts with a draft for the period before
	b.Queue(`
		SELECT account_id::text, period = $2, id::text, status, coalesce(number, ''), po_number, total_cents
		FROM invoices WHERE account_id = ANY ($3::text[]::uuid[]) AND period IN ($1, $2) AND status <> 'void'`,
		p.Prev().Start(), p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var current bool
			var doc existingDoc
			var total Cents
			if err := rows.Scan(&id, &current, &doc.id, &doc.status, &doc.number, &doc.poNumber, &total); err != nil {
				return err
			}
			in := get(id)
			if current {
				in.current = &doc
				continue
			}
			in.previous = &total
			if doc.status == string(StatusDraft) {
				drafts[id] = true
			}
		}
		return rows.Err()
	})
	queueLedger(b, ledger.AccountCustomerCredit, ids, bound, p, func(owner string) *ledgerFigures { return &get(owner).ledger })
	flags := queuePeriodFlags(b, p, customerFlags, ids)
	b.Queue(`
		SELECT cn.account_id::text, cn.id::text, cn.number, cn.reason, cn.credited_pico,
			coalesce((SELECT sum(c.amount_pico) FROM credit_note_clawbacks c WHERE c.credit_note_id = cn.id), 0)
		FROM credit_notes cn
		WHERE cn.account_id = ANY ($2::text[]::uuid[]) AND cn.period = $1 AND cn.credited_pico > 0
		ORDER BY cn.issued_at, cn.number`, p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var c creditGiven
			if err := rows.Scan(&id, &c.id, &c.number, &c.reason, &c.credited, &c.clawedBack); err != nil {
				return err
			}
			in := get(id)
			in.credits = append(in.credits, c)
		}
		return rows.Err()
	})
	queueDetails(b, ids, func(id string) (*string, *BillingDetails) {
		in := get(id)
		return &in.accountName, &in.details
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, wrapf(err, "invoicing: read the inputs of %d invoices of %s", len(ids), p)
	}
	// The requests flagged with an excess and not resolved, whose rows and resolutions hang on
	// those reads.
	rest := &pgx.Batch{}
	flags.queueRest(rest)
	if err := sendAny(ctx, q, rest); err != nil {
		return nil, wrapf(err, "invoicing: read the flagged requests of %d invoices of %s", len(ids), p)
	}
	for _, f := range flags.flagged() {
		if f.resolution == "" {
			in := get(f.usage.AccountID)
			in.flagged, in.flaggedCharge = in.flagged+1, in.flaggedCharge.Add(f.usage.Charge)
		}
	}
	for id, in := range out {
		in.carriesLate = lateOpen && !drafts[id]
	}
	return out, nil
}

// queueDetails queues the read of the accounts' names (accounts.QueueAccountsByID) and current
// billing details. An account that has given none is named on its documents by its name, its
// details dating from the account's creation.
func queueDetails(b *pgx.Batch, ids []string, into func(id string) (*string, *BillingDetails)) {
	accounts.QueueAccountsByID(b, ids, func(a accounts.NamedAccount) {
		name, d := into(a.ID)
		*name = a.Name
		*d = BillingDetails{AccountID: a.ID, Party: Party{LegalName: a.Name}.withCountryName(), UpdatedAt: a.CreatedAt}
	})
	b.Queue(`
		SELECT account_id::text, legal_name, address, country, vat_id, po_number, updated_at
		FROM billing_details WHERE account_id = ANY ($1::text[]::uuid[])`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			d := BillingDetails{Set: true}
			if err := rows.Scan(&d.AccountID, &d.LegalName, &d.Address, &d.Country, &d.VATID, &d.PONumber, &d.UpdatedAt); err != nil {
				return err
			}
			d.Party = d.Party.withCountryName()
			_, dst := into(d.AccountID)
			*dst = d
		}
		return rows.Err()
	})
}
