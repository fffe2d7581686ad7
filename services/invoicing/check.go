package invoicing

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/usagestore"
)

// The exact check of an invoice's usage: the rollups it was computed from against the usage
// rows they sum (usage_events), per tier, model and price version, to the picodollar and the
// token. A close checks a sample of its accounts; finance checks any invoice on demand.

// UsageCheck is the outcome of a check.
type UsageCheck struct {
	InvoiceID   string            `json:"invoice_id"`
	Matches     bool              `json:"matches"`
	Differences []UsageDifference `json:"differences"`
	// RowsDropped says the period's usage rows were dropped after their retention, its
	// documents being final (docs/usage-storage.md, "Retention"): there is nothing to check the
	// rollups against, so nothing is flagged.
	RowsDropped bool `json:"rows_dropped"`
}

// UsageDifference is a line whose rollups and usage rows disagree.
type UsageDifference struct {
	Tier    string `json:"tier"`
	Model   string `json:"model"`
	PriceID int64  `json:"price_id"`
	// Rollup and Rows are what each says: requests, tokens and charge.
	RollupRequests int64  `json:"rollup_requests"`
	RowRequests    int64  `json:"row_requests"`
	RollupCharge   string `json:"rollup_charge_pico"`
	RowCharge      string `json:"row_charge_pico"`
}

// CheckInvoiceUsage checks an invoice's period of usage exactly against the usage rows, and
// flags the invoice for review when it is a draft and they differ (an issued invoice never
// changes; its check is reported only).
func (s *Service) CheckInvoiceUsage(ctx context.Context, invoiceID string) (_ UsageCheck, err error) {
	defer services.Wrap(&err, "invoicing.CheckInvoiceUsage(%s)", invoiceID)
	if !isUUID(invoiceID) {
		return UsageCheck{}, errInvoiceNotFound
	}
	var accountID string
	var period time.Time
	if err := s.pool.QueryRow(ctx, `SELECT account_id::text, period FROM invoices WHERE id = $1`, invoiceID).
		Scan(&accountID, &period); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return UsageCheck{}, errInvoiceNotFound
		}
		return UsageCheck{}, err
	}
	check, err := s.checkUsage(ctx, s.pool, accountID, periodOfDate(period))
	if err != nil {
		return UsageCheck{}, err
	}
	check.InvoiceID = invoiceID
	if !check.Matches && !check.RowsDropped {
		if _, err := s.pool.Exec(ctx, `
			UPDATE invoices SET flags = array_append(flags, $2), flag_notes = array_append(flag_notes, 'the total differs from the usage rows it sums')
			WHERE id = $1 AND status = 'draft' AND NOT ($2 = ANY (flags))`, invoiceID, string(FlagUsageMismatch)); err != nil {
			return UsageCheck{}, err
		}
	}
	return check, nil
}

// checkUsage compares an account's rollups of a period with its usage rows, unless the
// period's rows were dropped after their retention.
func (s *Service) checkUsage(ctx context.Context, q querier, accountID string, p Period) (UsageCheck, error) {
	var dropped bool
	var rollups, rows = map[usageKey]usageSums{}, map[usageKey]usageSums{}
	into := func(m map[usageKey]usageSums) func(metering.LineTotals) {
		return func(l metering.LineTotals) {
			m[usageKey{tier: l.Tier, model: l.Model, priceID: l.PriceID}] = usageSums{requests: l.Requests, input: l.InputTokens,
				output: l.OutputTokens, charge: l.Charge, payable: l.Payable, cached: l.CachedInputTokens}
		}
	}
	b := &pgx.Batch{}
	usagestore.QueueMonthDropped(b, p.Start(), &dropped)
	metering.QueueRollupLines(b, accountID, p.Start(), p.End(), into(rollups))
	metering.QueueUsageLines(b, accountID, p.Start(), p.End(), into(rows))
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return UsageCheck{}, wrapf(err, "invoicing: check the usage of %s in %s", accountID, p)
	}
	if dropped {
		return UsageCheck{RowsDropped: true, Differences: []UsageDifference{}}, nil
	}
	check := UsageCheck{Matches: true, Differences: []UsageDifference{}}
	keys := unionKeys(rollups, rows)
	slices.SortFunc(keys, func(a, b usageKey) int {
		return strings.Compare(a.tier+"\x00"+a.model, b.tier+"\x00"+b.model)
	})
	for _, k := range keys {
		a, r := rollups[k], rows[k]
		if a == r {
			continue
		}
		check.Matches = false
		check.Differences = append(check.Differences, UsageDifference{Tier: k.tier, Model: k.model, PriceID: k.priceID,
			RollupRequests: a.requests, RowRequests: r.requests, RollupCharge: picoText(a.charge), RowCharge: picoText(r.charge)})
	}
	return check, nil
}
