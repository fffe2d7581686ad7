package admission

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// What admission reads of other packages' tables, queued into the batch that reads an account's figures, so that
// they come from the snapshot of its holds, in the same round trip (Admission.load): the balance from package
// ledger and the keys' creators from package accounts, which it imports; the meter's usage (Usage) and the budgets
// (Limits) from packages that import this one, and so are handed in (AdmissionConfig).

// Usage is what admission reads of the meter's usage. metering.GatewayReads implements it.
type Usage interface {
	// Metered is the SQL condition that the request whose id is the SQL expression requestID is metered, for
	// admission's statements of holds: a hold counts only while its request is not metered, in the snapshot that
	// reads the hold.
	Metered(requestID string) string
	// QueueMetered queues into b the read of which of requestIDs are metered, each passed to metered.
	QueueMetered(b *pgx.Batch, requestIDs []string, metered func(requestID string))
	// QueueSpendInPeriods queues into b the read of each key's metered spend in the period keys gives it that
	// holds now (UTC): the day, the week from its Monday, or the month; into spent, by key.
	QueueSpendInPeriods(b *pgx.Batch, keys map[string]periods.Period, now time.Time, spent map[string]money.BigPico)
	// QueueKeySpend queues into b the read of the keys' metered spend in month and on each day of [from, to), into
	// spend.
	QueueKeySpend(b *pgx.Batch, keys []string, month, from, to time.Time, spend *KeySpend)
}

// KeySpend is what the meter billed some API keys: each key's charges in a month, and on the days of a span that
// have any.
type KeySpend struct {
	Month map[string]money.BigPico // by key
	Days  []DaySpend
}

// DaySpend is what the meter billed an API key on one day (UTC).
type DaySpend struct {
	Key    string
	Day    time.Time
	Charge money.BigPico
}

// Limits is what admission reads of the budgets: an account's member limits and monthly budget.
// budgets.AdmissionLimits implements it.
type Limits interface {
	// QueueLimited queues into b the read of whether the account has a member limit or a monthly budget, into
	// limited.
	QueueLimited(b *pgx.Batch, accountID string, limited *bool)
	// QueueLimits queues into b the read of the account's monthly budget and member limits, into limits.
	QueueLimits(b *pgx.Batch, accountID string, limits *AccountLimits)
}

// AccountLimits are an account's monthly budget and member limits, as admission holds requests to them.
type AccountLimits struct {
	Budget  *money.BigPico         // the monthly budget; nil for none
	Members map[string]MemberLimit // by the user id of the person whose keys it limits
}

// MemberLimit is what the keys one person created in an account may spend per period.
type MemberLimit struct {
	Limit  money.BigPico
	Period periods.Period
}

// readSnapshot sends the statements queue puts into a batch in one read-only, repeatable-read transaction, begun
// and committed by the batch itself: they read one snapshot, in one round trip. With perCall, the transaction plans
// each statement for its call (plan_cache_mode force_custom_plan), as an unnamed statement is: a plan cached while
// a table was nearly empty would go on scanning it whole as it grows.
func (a *Admission) readSnapshot(ctx context.Context, perCall bool, queue func(b *pgx.Batch)) error {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	if perCall {
		b.Queue(`SET LOCAL plan_cache_mode = force_custom_plan`)
	}
	queue(b)
	b.Queue(`COMMIT`)
	return a.cfg.Pool.SendBatch(ctx, b).Close()
}
