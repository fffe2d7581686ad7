package invoicing

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

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
	b.Queue(`
		SELECT provider_account_id::text, hour >= $2, offering_id::text, model, ask_input_price, ask_output_price,
			coalesce(ask_cached_input_price, ask_input_price), `+sumColumns+`
		FROM usage_hourly
		WHERE provider_account_id = ANY ($4::text[]::uuid[]) AND hour >= $1 AND hour < $3
		GROUP BY 1, 2, 3, 4, 5, 6, 7`, from, p.Start(), p.End(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var current bool
			var k offerKey
			var s usageSums
			if err := rows.Scan(append([]any{&id, &current, &k.offering, &k.model, &k.askIn, &k.askOut, &k.askCached},
				sumsTargets(&s)...)...); err != nil {
				return err
			}
			// A statement pays the provider's part; what the customer paid is not its business,
			// and statement lines do not keep it.
			s.charge = money.BigPico{}
			get(id).usage.add(current, k, s)
		}
		return rows.Err()
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
	b.Queue(`SELECT id::text, provider_account_id::text, gpu, gpu_count, region FROM offerings
		WHERE provider_account_id = ANY ($1::text[]::uuid[])`, ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, provider string
			var o offering
			if err := rows.Scan(&id, &provider, &o.gpu, &o.gpuCount, &o.region); err != nil {
				return err
			}
			get(provider).offerings[id] = o
		}
		return rows.Err()
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
	queueLedger(b, "provider_payable", ids, bound, p, func(owner string) *ledgerFigures { return &get(owner).ledger })
	// The period's requests flagged with an excess: held unless released before the period
	// ended; and the held requests of earlier periods released in this one (docs/invoicing.md,
	// "Flags and held earnings").
	b.Queue(`
		SELECT u.provider_account_id::text, count(*), coalesce(sum(u.payable_pico), 0),
			count(*) FILTER (WHERE r.request_id IS NULL), coalesce(sum(u.payable_pico) FILTER (WHERE r.request_id IS NULL), 0)
		FROM (`+periodFlags("provider_account_id")+`) f
		JOIN usage_events u ON u.request_id = f.request_id AND u.occurred_at >= $1 AND u.occurred_at < $2
		LEFT JOIN flag_resolutions r ON r.request_id = u.request_id
		WHERE NOT (r.resolution IS NOT DISTINCT FROM 'released' AND r.resolved_at < $2)
		GROUP BY 1`, p.Start(), p.End(), ids).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var held, unresolved int64
			var heldPayable, unresolvedPayable money.BigPico
			if err := rows.Scan(&id, &held, &heldPayable, &unresolved, &unresolvedPayable); err != nil {
				return err
			}
			in := get(id)
			in.held, in.heldPayable, in.unresolved, in.unresolvedPayable = held, heldPayable, unresolved, unresolvedPayable
		}
		return rows.Err()
	})
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
	for id, in := range out {
		in.carriesLate = lateOpen && !drafts[id]
	}
	return out, nil
}
