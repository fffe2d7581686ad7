package catalog

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// divergenceFactor is how far a rig's own figures may be better than the gateway's before they
// are flagged. The gateway measures from outside the rig, network and queueing included, so a
// rig's time to first token is a little shorter and its throughput a little higher than the
// gateway's; twice as fast is no network's doing (see docs/tiers-and-asks.md).
const divergenceFactor = 2

// Reported reports whether the rig's own figures rest on enough requests to be shown and
// compared.
func (o Offering) Reported() bool {
	return o.ReportedRequests >= MinMeasuredRequests && o.ReportedTTFTP99Ms != nil
}

// ReportDivergence says how the rig's own figures disagree with the gateway's by more than
// divergenceFactor: its P99 time to first token under half the gateway's, or its throughput
// over twice the gateway's. It is "" when they agree, or when either side rests on fewer than
// MinMeasuredRequests requests.
func (o Offering) ReportDivergence() string {
	if !o.Measured() || !o.Reported() {
		return ""
	}
	var out string
	if *o.ReportedTTFTP99Ms*divergenceFactor < *o.MeasuredTTFTP99Ms {
		out = fmt.Sprintf("The rig reports a P99 time to first token of %s ms, under half the %s ms the gateway measured.",
			oneDecimal(*o.ReportedTTFTP99Ms), oneDecimal(*o.MeasuredTTFTP99Ms))
	}
	if r, m := o.ReportedTokensPerSec, o.MeasuredTokensPerSec; r != nil && m != nil && *r > *m*divergenceFactor {
		if out != "" {
			out += " "
		}
		out += fmt.Sprintf("The rig reports %s tokens per second, over twice the %s the gateway measured.",
			oneDecimal(*r), oneDecimal(*m))
	}
	return out
}

func oneDecimal(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// ListDivergent returns the listed offerings of every provider whose rig's own figures disagree
// with the gateway's (ReportDivergence), for admins; the provider sees its own on its rigs.
func (s *Service) ListDivergent(ctx context.Context) (_ []Offering, err error) {
	defer services.Wrap(&err, "catalog.ListDivergent")
	rows, err := s.pool.Query(ctx, `SELECT `+offeringColumns+`
		FROM offerings o
		WHERE o.status <> 'delisted' AND o.reported_requests >= $1 AND o.measured_requests >= $1
		ORDER BY o.model, o.id`, MinMeasuredRequests)
	if err != nil {
		return nil, err
	}
	all, err := s.collectOfferings(ctx, rows)
	if err != nil {
		return nil, err
	}
	// By provider's name, then model and id: the names come after the query.
	sort.SliceStable(all, func(i, j int) bool { return all[i].ProviderName < all[j].ProviderName })
	out := all[:0]
	for _, o := range all {
		if o.ReportDivergence() != "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// ObservedFigures are an offering's figures over a window of requests: the gateways' measured ones, or the
// rig's own reported ones. TokensPerSec is nil when the window has no throughput to tell.
type ObservedFigures struct {
	Requests             int64
	TTFTP50Ms, TTFTP99Ms float64
	TokensPerSec         *float64
}

// FiguresUpdate is what routing writes of one offering: its measured figures and the tier they earn, and the
// rig's reported figures, each nil when its window holds too few requests to tell.
type FiguresUpdate struct {
	OfferingID string
	Measured   *ObservedFigures
	Tier       Tier // with Measured
	Reported   *ObservedFigures
}

// RecordFigures writes the figures routing measured and the rig reported, and the tier the measured ones earn,
// to the offerings they are of, in one round trip: the catalog then shows them "measured over N requests", with the
// rig's own beside them. A delisted offering keeps its last figures; a throughput not told keeps the one before.
func (s *Service) RecordFigures(ctx context.Context, updates []FiguresUpdate) (err error) {
	defer services.Wrap(&err, "catalog.RecordFigures(%d)", len(updates))
	b := &pgx.Batch{}
	for _, u := range updates {
		if m := u.Measured; m != nil {
			b.Queue(`UPDATE offerings SET measured_requests = $2, measured_ttft_p50_ms = $3, measured_ttft_p99_ms = $4,
					measured_tokens_per_sec = coalesce($5, measured_tokens_per_sec), tier = $6
				WHERE id = $1 AND status <> 'delisted'`,
				u.OfferingID, m.Requests, m.TTFTP50Ms, m.TTFTP99Ms, m.TokensPerSec, string(u.Tier))
		}
		if r := u.Reported; r != nil {
			b.Queue(`UPDATE offerings SET reported_requests = $2, reported_ttft_p50_ms = $3, reported_ttft_p99_ms = $4,
					reported_tokens_per_sec = coalesce($5, reported_tokens_per_sec)
				WHERE id = $1 AND status <> 'delisted'`,
				u.OfferingID, r.Requests, r.TTFTP50Ms, r.TTFTP99Ms, r.TokensPerSec)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return s.pool.SendBatch(ctx, b).Close()
}
