package payouts

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/progress"
)

// Run is the payouts of one period, as the payouts pages follow them (docs/progress.md): a
// payout ends paid or failed; the run goes on while one is pending. Its total is the payouts
// made for the period so far: approval makes a statement's payout as it pays it.
type Run struct {
	Period                       string // YYYY-MM; "" when there is no payout at all
	Total, Paid, Failed, Pending int64
	Reading                      progress.Reading
}

// RunProgress returns the run of period ("" for the latest period with a payout): every
// provider's for finance (providerAccountID ""), or one provider's own.
func (s *Service) RunProgress(ctx context.Context, period, providerAccountID string) (_ Run, err error) {
	defer services.Wrap(&err, "payouts.RunProgress(%s)", period)
	if providerAccountID != "" && !uuidPattern.MatchString(providerAccountID) {
		return Run{Period: period}, nil
	}
	now := s.now().UTC()
	var started *time.Time
	var got *string
	run := Run{}
	if err := s.pool.QueryRow(ctx, `
		WITH scoped AS (SELECT * FROM payouts WHERE $2 = '' OR provider_account_id::text = $2),
		chosen AS (SELECT coalesce(nullif($1, ''), (SELECT max(period) FROM scoped)) AS period)
		SELECT (SELECT period FROM chosen), count(p.id), count(p.id) FILTER (WHERE p.status = 'paid'),
			count(p.id) FILTER (WHERE p.status = 'failed'), count(p.id) FILTER (WHERE p.status = 'pending'),
			count(p.id) FILTER (WHERE p.status <> 'pending' AND p.updated_at > $3), min(p.created_at)
		FROM scoped p WHERE p.period = (SELECT period FROM chosen)`,
		period, providerAccountID, now.Add(-progress.Window)).Scan(&got, &run.Total, &run.Paid, &run.Failed, &run.Pending,
		&run.Reading.Recent, &started); err != nil {
		return Run{}, err
	}
	if got != nil {
		run.Period = *got
	}
	run.Reading.Done, run.Reading.Total, run.Reading.Running = run.Paid+run.Failed, run.Total, run.Pending > 0
	if started != nil && run.Reading.Running {
		run.Reading.Span = progress.RecentSpan(*started, now)
	}
	return run, nil
}
