package metering

import (
	"context"
	"sort"

	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// references are the catalog rows, the price versions and the gateway's records a batch is
// judged against, read inside its transaction so that the batch is judged on one consistent
// view.
type references struct {
	offerings map[string]offeringRef // by offering id
	accounts  map[string]bool
	prices    map[int64]priceRow // by id: the versions the batch's tickets name
	// records[i] is the gateway's record of candidate i's request, when recorded[i].
	records  []gatewayRecord
	recorded []bool
}

// offeringRef is what the meter reads of an offering: its provider's account id and its model,
// which a price version of one model (a model's own row of the price book) must name.
type offeringRef struct {
	provider, model string
}

// canonicalUUIDs is the uuid[] of the elements of the text[] parameter $1 written as the
// database writes a uuid, lower-case and canonical; no other id can match a row, and casting
// one could abort the batch's transaction.
const canonicalUUIDs = `ARRAY(SELECT id::uuid FROM unnest($1::text[]) AS id
	WHERE id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')`

// loadReferences reads, in three round trips, the batch's offerings, customer accounts and price
// versions, then the gateway's records of its requests (a round trip to describe the statement,
// one to run it). The offering's current ask is not read: the provider is paid the asks its
// tickets carry.
func loadReferences(ctx context.Context, tx pgx.Tx, cands []candidate) (references, error) {
	refs := references{offerings: map[string]offeringRef{}, accounts: map[string]bool{}, prices: map[int64]priceRow{},
		records: make([]gatewayRecord, len(cands)), recorded: make([]bool, len(cands))}
	var offeringIDs, accountIDs []string
	var priceIDs []int64
	requestIDs := make([]string, len(cands))
	seenOffering, seenAccount, seenPrice := map[string]bool{}, map[string]bool{}, map[int64]bool{}
	for i := range cands {
		if id := cands[i].ev.Data.OfferingID; !seenOffering[id] {
			seenOffering[id] = true
			offeringIDs = append(offeringIDs, id)
		}
		if id := cands[i].claims.AccountID; !seenAccount[id] {
			seenAccount[id] = true
			accountIDs = append(accountIDs, id)
		}
		if id := cands[i].claims.PriceID; !seenPrice[id] {
			seenPrice[id] = true
			priceIDs = append(priceIDs, id)
		}
		requestIDs[i] = cands[i].ev.Data.RequestID
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT id::text, provider_account_id::text, model FROM offerings
		WHERE id = ANY (`+canonicalUUIDs+`)`, offeringIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var o offeringRef
			if err := rows.Scan(&id, &o.provider, &o.model); err != nil {
				return err
			}
			refs.offerings[id] = o
		}
		return rows.Err()
	})
	b.Queue(`SELECT id::text FROM accounts WHERE id = ANY (`+canonicalUUIDs+`)`, accountIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			refs.accounts[id] = true
		}
		return rows.Err()
	})
	b.Queue(`SELECT id, tier, coalesce(model, ''), input_micro_usd_per_mtok, output_micro_usd_per_mtok, cached_input_micro_usd_per_mtok
		FROM prices WHERE id = ANY ($1)`,
		priceIDs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var p priceRow
			if err := rows.Scan(&p.id, &p.tier, &p.model, &p.input, &p.outp, &p.cached); err != nil {
				return err
			}
			refs.prices[p.id] = p
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return refs, err
	}
	// Each record comes back with the index of its request in requestIDs, and its status only
	// when it is not "ok": no string to read back for nearly every one. Each request is looked
	// up by its primary key, one probe per request (the LATERAL subquery with OFFSET 0 is never
	// flattened into a join, so no plan scans the table whole), and the statement is planned for
	// each call, as an unnamed statement described afresh (QueryExecModeDescribeExec), outside the
	// batch's cached statements: a plan cached while gateway_requests was nearly empty would scan
	// it whole as it grows, and a join planned for a batch of thousands hashes the whole table,
	// 150 ms a batch at 200,000 records. Described, the request ids go in and the records come
	// back in binary, which costs both sides less than thousands of them written and parsed as
	// text, for one more round trip, taken before the batch holds any lock.
	rows, err := tx.Query(ctx, `SELECT r.n - 1, g.http_status, nullif(g.status, 'ok'), g.relayed_output_bytes, g.relayed_output_chunks,
			g.cached_input_tokens
		FROM unnest($1::text[]) WITH ORDINALITY AS r (request_id, n)
		CROSS JOIN LATERAL (SELECT http_status, status, relayed_output_bytes, relayed_output_chunks, cached_input_tokens
			FROM gateway_requests WHERE request_id = r.request_id OFFSET 0) g`, pgx.QueryExecModeDescribeExec, requestIDs)
	if err != nil {
		return refs, err
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var status pgtype.Text
		var bytes, chunks, cached pgtype.Int8
		var r gatewayRecord
		if err := rows.Scan(&i, &r.httpStatus, &status, &bytes, &chunks, &cached); err != nil {
			return refs, err
		}
		r.status = requestlog.GatewayOK
		if status.Valid {
			r.status = requestlog.GatewayStatus(status.String)
		}
		r.relayedBytes, r.relayedChunks, r.counted = bytes.Int64, chunks.Int64, bytes.Valid
		r.cachedSeen, r.sawCached = cached.Int64, cached.Valid
		refs.records[i], refs.recorded[i] = r, true
	}
	return refs, rows.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
