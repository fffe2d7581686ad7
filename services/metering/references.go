package metering

import (
	"context"
	"regexp"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
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

// canonicalUUID matches an id written as the database writes a uuid, lower-case and canonical: no other id can
// match a row, and casting one could abort the batch's transaction.
var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// loadReferences reads, in three round trips, the batch's offerings, customer accounts and price versions (the
// catalog's and the accounts' reads, sent together), then the gateway's records of its requests
// (requestlog.AttemptsBilled: a round trip to describe the statement, one to run it, taken before the batch holds
// any lock). The offering's current ask is not read: the provider is paid the asks its tickets carry.
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
			if canonicalUUID.MatchString(id) {
				offeringIDs = append(offeringIDs, id)
			}
		}
		if id := cands[i].claims.AccountID; !seenAccount[id] {
			seenAccount[id] = true
			if canonicalUUID.MatchString(id) {
				accountIDs = append(accountIDs, id)
			}
		}
		if id := cands[i].claims.PriceID; !seenPrice[id] {
			seenPrice[id] = true
			priceIDs = append(priceIDs, id)
		}
		requestIDs[i] = cands[i].ev.Data.RequestID
	}
	rigs, prices := map[string]catalog.Rig{}, map[int64]catalog.Price{}
	b := &pgx.Batch{}
	catalog.QueueRigs(b, offeringIDs, rigs)
	accounts.QueueExisting(b, accountIDs, refs.accounts)
	catalog.QueuePricesByID(b, priceIDs, prices)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return refs, err
	}
	for id, r := range rigs {
		refs.offerings[id] = offeringRef{provider: r.ProviderAccountID, model: r.Model}
	}
	for id, p := range prices {
		refs.prices[id] = priceRow{id: p.ID, tier: string(p.Tier), model: p.Model, input: int64(p.Input), outp: int64(p.Output),
			cached: int64(p.CachedInput)}
	}
	attempts, err := requestlog.AttemptsBilled(ctx, tx, requestIDs)
	if err != nil {
		return refs, err
	}
	for i, a := range attempts {
		if !a.Recorded {
			continue
		}
		refs.records[i] = gatewayRecord{httpStatus: a.HTTPStatus, status: a.Status, relayedBytes: a.RelayedOutputBytes,
			relayedChunks: a.RelayedOutputChunks, counted: a.Counted, cachedSeen: a.CachedInputTokens, sawCached: a.SawCached}
		refs.recorded[i] = true
	}
	return refs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
