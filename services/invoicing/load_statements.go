package invoicing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
)

// loadProviders reads the inputs of the providers' statements for period p; lateOpen as for
// loadCustomers.
func loadProviders(ctx context.Context, q querier, p Period, lateOpen bool, bound int64, ids []string) (map[string]*providerInputs, error) {
	out := make(map[string]*providerInputs, len(ids))
	get := func(id string) *providerInputs {
		in := out[id]
		if in == nil {
			in = &providerInputs{providerID: id, usage: newByPeriod[offerKey](), invoiced: newByPeriod[offerKey](),
				offerings: map[string]offering{}}
			out[id] = in
		}
		return in
	}
	for _, id := range ids {
		get(id)
	}
	from := p.Start()
	if lateOpen {
		from = p.Prev().Start()
	}
	b := &pgx.Batch{}
	metering.QueueProviderRollups(b, ids, from, p.Start(), p.End(), func(r metering.ProviderRollup) {
		k := offerKey{offering: r.OfferingID, model: r.Model, askIn: r.AskInput, askOut: r.AskOutput, askCached: r.AskCachedInput}
		s := sumsOf(r.Sums)
		// A statement pays the provider's part; what the customer paid is not its business,
		// and statement lines do not keep it.
		s.charge = money.BigPico{}
		get(r.ProviderID).usage.add(r.Current, k, s)
	})
	b.Queue(`
		SELECT s.provider_account_id::text, l.usage_period = $2, l.offering_id::text, l.model, l.ask_input_price,
			l.ask_output_price, coalesce(l.ask_cached_input_price, l.ask_input_price), sum(l.requests)::bigint,
			sum(l.input_tokens)::bigint, sum(l.output_tokens)::bigint,
			sum(l.uncharged_requests)::bigint, sum(l.uncharged_input_tokens)::bigint, sum(l.uncharged_output_tokens)::bigint,
			0::numeric, sum(l.payable_pico), sum(l.cached_input_tokens)::bigint, sum(l.uncharged_cached_input_tokens)::bigint
		FROM statements s JOIN statement_lines l ON l.statement_id = s.id
		WHERE s.provider_account_id = ANY ($3::text[]::uuid[]) AND s.status IN ('issued', 'paid')
			AND l.kind IN ('usage', 'late_usage') AND l.usage_period >= $1 AND l.usage_period <= $2
		GROUP BY 1, 2, 3, 4, 5, 6, 7`, from, p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var current bool
			var k offerKey
			var s usageSums
			if err := rows.Scan(append([]any{&id, &current, &k.offering, &k.model, &k.askIn, &k.askOut, &k.askCached},
				sumsTargets(&s)...)...); err != nil {
				return err
			}
			get(id).invoiced.add(current, k, s)
		}
		return rows.Err()
	})
	catalog.QueueRigsOfProviders(b, ids, func(provider string, r catalog.Rig) {
		get(provider).offerings[r.OfferingID] = offering{gpu: r.GPU, gpuCount: r.GPUCount, region: r.Region}
	})
	// The statements of the period and the one before (for the spike flag and whether its late
	// usage lands on its own draft), and the latest statement before the period, whose carry
	// this one continues.
	drafts := map[string]bool{}
	b.Queue(`
		SELECT provider_account_id::text, period = $2, id::text, status, coalesce(number, ''), earnings_cents
		FROM statements WHERE provider_account_id = ANY ($3::text[]::uuid[]) AND period IN ($1, $2) AND status <> 'void'`,
		p.Prev().Start(), p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var current bool
			var doc existingDoc
			var earnings Cents
			if err := rows.Scan(&id, &current, &doc.id, &doc.status, &doc.number, &earnings); err != nil {
				return err
			}
			in := get(id)
			if current {
				in.current = &doc
				continue
			}
			in.lastMonth = &earnings
			if doc.status == string(StatusDraft) {
				drafts[id] = true
			}
		}
		return rows.Err()
	})
	b.Queue(`
		SELECT DISTINCT ON (provider_account_id) provider_account_id::text, id::text, status, period, carried_out_cents
		FROM statements WHERE provider_account_id = ANY ($2::text[]::uuid[]) AND period < $1 AND status <> 'void'
		ORDER BY provider_account_id, period DESC`, p.Start(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var prev previousStatement
			var period time.Time
			if err := rows.Scan(&id, &prev.id, &prev.status, &period, &prev.carriedOut); err != nil {
				return err
			}
			prev.period = periodOfDate(period)
			get(id).previous = &prev
		}
		return rows.Err()
	})
	queueLedger(b, ledger.AccountProviderPayable, ids, bound, p, func(owner string) *ledgerFigures { return &get(owner).ledger })
	// The period's requests flagged with an excess: held unless released before the period
	// ended; and the held requests of earlier periods released in this one (docs/invoicing.md,
	// "Flags and held earnings").
	flags := queuePeriodFlags(b, p, providerFlags, ids)
	b.Queue(`
		SELECT provider_account_id::text, count(*), sum(held_pico) FROM flag_resolutions
		WHERE resolution = 'released' AND resolved_at >= $1 AND resolved_at < $2 AND occurred_at < $1
			AND provider_account_id = ANY ($3::text[]::uuid[])
		GROUP BY 1`, p.Start(), p.End(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var n int64
			var payable money.BigPico
			if err := rows.Scan(&id, &n, &payable); err != nil {
				return err
			}
			in := get(id)
			in.released, in.releasedPayable = n, payable
		}
		return rows.Err()
	})
	queueDetails(b, ids, func(id string) (*string, *BillingDetails) {
		in := get(id)
		return &in.providerName, &in.details
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, wrapf(err, "invoicing: read the inputs of %d statements of %s", len(ids), p)
	}
	// What hangs on those reads, when there is any: the flagged requests' rows and resolutions,
	// and the credit notes of the clawbacks.
	rest := &pgx.Batch{}
	flags.queueRest(rest)
	queueCreditNoteNames(rest, out)
	if err := sendAny(ctx, q, rest); err != nil {
		return nil, wrapf(err, "invoicing: read the flagged requests and credit notes of %d statements of %s", len(ids), p)
	}
	for _, f := range flags.flagged() {
		if f.resolution == ResolutionRelease && f.resolvedAt.Before(p.End()) {
			continue // released before the period ended: not held
		}
		in := get(f.usage.ProviderID)
		in.held, in.heldPayable = in.held+1, in.heldPayable.Add(f.usage.Payable)
		if f.resolution == "" {
			in.unresolved, in.unresolvedPayable = in.unresolved+1, in.unresolvedPayable.Add(f.usage.Payable)
		}
	}
	for id, in := range out {
		in.carriesLate = lateOpen && !drafts[id]
	}
	return out, nil
}

// queueCreditNoteNames queues on b, when the providers' ledger entries hold credit notes' transactions, the read
// of the credit note each records, which its clawback line names.
func queueCreditNoteNames(b *pgx.Batch, providers map[string]*providerInputs) {
	byTxn := map[string][]*ledgerEntry{}
	for _, in := range providers {
		for i, e := range in.ledger.entries {
			if e.Kind == string(ledger.TransactionCreditNote) {
				byTxn[e.TransactionID] = append(byTxn[e.TransactionID], &in.ledger.entries[i])
			}
		}
	}
	if len(byTxn) == 0 {
		return
	}
	txns := make([]string, 0, len(byTxn))
	for txn := range byTxn {
		txns = append(txns, txn)
	}
	b.Queue(`SELECT ledger_transaction_id::text, min(id::text), min(number) FROM credit_notes
		WHERE ledger_transaction_id = ANY ($1::text[]::uuid[]) GROUP BY 1`, txns).Query(func(rows pgx.Rows) error {
		var txn, id, number string
		_, err := pgx.ForEachRow(rows, []any{&txn, &id, &number}, func() error {
			for _, e := range byTxn[txn] {
				e.creditNoteID, e.creditNoteNumber = id, number
			}
			return nil
		})
		return err
	})
}
