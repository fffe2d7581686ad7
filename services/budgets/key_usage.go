package budgets

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// KeyUsage is an API key's metered spend and where it stands against its limit.
type KeyUsage struct {
	Key   accounts.APIKey
	Spend metering.KeySpend // today, this week, this month (UTC)
	// InPeriod is the spend in the limit's current period (the month for a key without limit);
	// Remaining is the limit less it, never below zero, nil without a limit; ResetsAt is when
	// the period ends.
	InPeriod  money.BigPico
	Remaining *money.BigPico
	ResetsAt  time.Time
}

// KeyUsages is the usage of each of the keys at the service's clock, in their order.
func (s *Service) KeyUsages(ctx context.Context, keys []accounts.APIKey) (_ []KeyUsage, err error) {
	defer services.Wrap(&err, "budgets.KeyUsages")
	now := s.now()
	spend, err := s.spend.KeySpend(ctx, keyIDs(keys), now)
	if err != nil {
		return nil, err
	}
	out := make([]KeyUsage, len(keys))
	for i, k := range keys {
		out[i] = usageOf(k, spend[k.ID], now)
	}
	return out, nil
}

func usageOf(k accounts.APIKey, spend metering.KeySpend, now time.Time) KeyUsage {
	p := k.LimitPeriod
	if !p.Valid() {
		p = periods.Month
	}
	u := KeyUsage{Key: k, Spend: spend, InPeriod: spend.In(p), ResetsAt: p.End(now)}
	if k.Limit != nil {
		r := money.BigPicoOf(*k.Limit).Add(u.InPeriod.Neg())
		if r.Sign() < 0 {
			r = money.BigPicoOf(0)
		}
		u.Remaining = &r
	}
	return u
}
