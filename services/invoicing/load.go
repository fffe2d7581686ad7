package invoicing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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

// ledgerBound is a lower bound of the ids of the postings of every transaction that occurred
// at or after t, as the ledger stands now: the least posting id among those transactions, or
// one past the last posting when there are none. Postings are numbered as they are recorded,
// so a document's balances read only the postings from it on, through the index on (ledger
// account, id), whatever the ledger's history before. It is computed afresh by each operation
// (a close, an approval): a transaction recorded later has a larger id.
func ledgerBound(ctx context.Context, q querier, t time.Time) (int64, error) {
	var bound int64
	err := q.QueryRow(ctx, `
		SELECT coalesce(
			(SELECT min(p.id) FROM ledger_transactions t JOIN ledger_postings p ON p.transaction_id = t.id
			 WHERE t.occurred_at >= $1),
			(SELECT coalesce(max(id), 0) + 1 FROM ledger_postings))`, t).Scan(&bound)
	return bound, wrapf(err, "invoicing: where the ledger's postings of %s start", t.Format(time.RFC3339))
}

// loadPrices reads the whole price book: a few rows per price change.
func loadPrices(ctx context.Context, q querier) (map[int64]price, error) {
	rows, err := q.Query(ctx, `SELECT id, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from,
		cached_input_micro_usd_per_mtok, coalesce(model, '') FROM prices`)
	if err != nil {
		return nil, wrapf(err, "invoicing: read the price book")
	}
	out := map[int64]price{}
	for rows.Next() {
		var id, in, outp, cached int64
		var from time.Time
		var model string
		if err := rows.Scan(&id, &in, &outp, &from, &cached, &model); err != nil {
			return nil, err
		}
		out[id] = price{input: money.MicroUSD(in), output: money.MicroUSD(outp), cached: money.MicroUSD(cached), from: from.UTC(), model: model}
	}
	return out, wrapf(rows.Err(), "invoicing: read the price book")
}

// scanSums reads the sums a query writes as requests, input, output, uncharged requests,
// uncharged input, uncharged output, charge, payable, cached input, uncharged cached input.
func sumsTargets(s *usageSums) []any {
	return []any{&s.requests, &s.input, &s.output, &s.unchargedRequests, &s.unchargedInput, &s.unchargedOutput, &s.charge, &s.payable,
		&s.cached, &s.unchargedCached}
}

// sumColumns sums the rollups' columns in the order sumsTargets reads them.
const sumColumns = `sum(requests)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
	sum(uncharged_requests)::bigint, sum(uncharged_input_tokens)::bigint, sum(uncharged_output_tokens)::bigint,
	sum(charge_pico), sum(payable_pico), sum(cached_input_tokens)::bigint, sum(uncharged_cached_input_tokens)::bigint`

// ledgerQuery reads, per owner of ledger accounts of a kind, the balance and the movements of
// the period by kind and occurred time, with each transaction other than usage in the period
// and the credit note it records. $1 kind, $2 owners, $3 the posting id bound, $4 start, $5 end.
const ledgerQuery = `
	WITH acc AS (
		SELECT id, owner_account_id, balance FROM ledger_accounts
		WHERE kind = $1 AND owner_account_id = ANY ($2::text[]::uuid[])),
	moves AS (
		SELECT p.ledger_account_id, t.id, t.kind, t.memo, t.occurred_at, p.amount
		FROM acc
		JOIN ledger_postings p ON p.ledger_account_id = acc.id AND p.id >= $3
		JOIN ledger_transactions t ON t.id = p.transaction_id AND t.occurred_at >= $4)
	SELECT acc.owner_account_id::text, acc.balance, m.kind, m.occurred_at < $5,
		CASE WHEN m.kind <> 'usage' AND m.occurred_at < $5 THEN m.id::text END AS txn,
		coalesce(min(m.memo), ''), min(m.occurred_at), coalesce(sum(m.amount), 0),
		coalesce(min(cn.id::text), ''), coalesce(min(cn.number), '')
	FROM acc
	LEFT JOIN moves m ON m.ledger_account_id = acc.id
	LEFT JOIN credit_notes cn ON cn.ledger_transaction_id = m.id
	GROUP BY 1, 2, 3, 4, 5`

// queueLedger queues the ledger query for owners and fills figures per owner.
func queueLedger(b *pgx.Batch, kind string, owners []string, bound int64, p Period, figures func(owner string) *ledgerFigures) {
	b.Queue(ledgerQuery, kind, owners, bound, p.Start(), p.End()).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var owner, memo, cnID, cnNumber string
			var balance, amount money.BigPico
			var kind, txn pgtype.Text
			var inPeriod pgtype.Bool
			var at pgtype.Timestamptz
			if err := rows.Scan(&owner, &balance, &kind, &inPeriod, &txn, &memo, &at, &amount, &cnID, &cnNumber); err != nil {
				return err
			}
			f := figures(owner)
			f.balance = balance
			if !kind.Valid {
				continue // no movement since the period began
			}
			f.sinceStart = f.sinceStart.Add(amount)
			if !inPeriod.Bool {
				f.sinceEnd = f.sinceEnd.Add(amount)
				continue
			}
			if f.byKind == nil {
				f.byKind = map[string]money.BigPico{}
			}
			f.byKind[kind.String] = f.byKind[kind.String].Add(amount)
			if txn.Valid {
				f.entries = append(f.entries, ledgerEntry{
					LedgerEntry:  LedgerEntry{TransactionID: txn.String, Kind: kind.String, Memo: memo, OccurredAt: at.Time.UTC(), Amount: amount},
					creditNoteID: cnID, creditNoteNumber: cnNumber})
			}
		}
		return rows.Err()
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
	b.Queue(`
		SELECT account_id::text, current, GROUPING(provider_account_id) = 1, tier, model, price_id,
			coalesce(provider_account_id::text, ''), `+sumColumns+`
		FROM (SELECT *, hour >= $2 AS current FROM usage_hourly
			WHERE account_id = ANY ($4::text[]::uuid[]) AND hour >= $1 AND hour < $3) h
		GROUP BY GROUPING SETS ((account_id, current, tier, model, price_id), (account_id, current, provider_account_id))`,
		from, p.Start(), p.End(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, provider string
			var current, isLine bool
			var k usageKey
			var tier, model pgtype.Text
			var priceID pgtype.Int8
			var s usageSums
			if err := rows.Scan(append([]any{&id, &current, &isLine, &tier, &model, &priceID, &provider}, sumsTargets(&s)...)...); err != nil {
				return err
			}
			in := get(id)
			if isLine {
				k = usageKey{tier: tier.String, model: model.String, priceID: priceID.Int64}
				in.usage.add(current, k, s)
			} else {
				in.shares.add(current, provider, s)
			}
		}
		return rows.Err()
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
	queueLedger(b, "customer_credit", ids, bound, p, func(owner string) *ledgerFigures { return &get(owner).ledger })
	b.Queue(`
		SELECT u.account_id::text, count(*), sum(u.charge_pico)
		FROM (`+periodFlags("account_id")+`) f
		JOIN usage_events u ON u.request_id = f.request_id AND u.occurred_at >= $1 AND u.occurred_at < $2
		WHERE NOT EXISTS (SELECT 1 FROM flag_resolutions r WHERE r.request_id = u.request_id)
		GROUP BY 1`, p.Start(), p.End(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var n int64
			var charge money.BigPico
			if err := rows.Scan(&id, &n, &charge); err != nil {
				return err
			}
			in := get(id)
			in.flagged, in.flaggedCharge = n, charge
		}
		return rows.Err()
	})
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
	for id, in := range out {
		in.carriesLate = lateOpen && !drafts[id]
	}
	return out, nil
}

// queueDetails queues the read of the accounts' names and current billing details.
func queueDetails(b *pgx.Batch, ids []string, into func(id string) (*string, *BillingDetails)) {
	b.Queue(`
		SELECT a.id::text, a.name, coalesce(d.legal_name, a.name), coalesce(d.address, ''), coalesce(d.country, ''),
			coalesce(d.vat_id, ''), coalesce(d.po_number, ''), coalesce(d.updated_at, a.created_at), d.account_id IS NOT NULL
		FROM accounts a LEFT JOIN billing_details d ON d.account_id = a.id
		WHERE a.id = ANY ($1::text[]::uuid[])`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, name string
			var d BillingDetails
			if err := rows.Scan(&id, &name, &d.LegalName, &d.Address, &d.Country, &d.VATID, &d.PONumber, &d.UpdatedAt, &d.Set); err != nil {
				return err
			}
			d.AccountID, d.Party = id, d.Party.withCountryName()
			n, dst := into(id)
			*n, *dst = name, d
		}
		return rows.Err()
	})
}
