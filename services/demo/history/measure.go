package history

import (
	"context"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/usage"
)

// measure writes what the platform measured of each offering the history served: the figures of the gateway's
// records of its attempts (requestlog.NewestByOffering, as requestlog.RequestLog wrote them), the newest
// routing.WindowSize of them, by the rules of routing's live figures (routing.FiguresOf): percentiles of the streamed requests' times
// to first token, throughput over the time the rig was busy. An offering whose records hold fewer than
// catalog.MinMeasuredRequests streamed requests keeps no measured figures: its claims stand, as routing's do.
func (h *history) measure(ctx context.Context) error {
	var keys []string
	for _, c := range h.customers {
		for _, id := range c.keys {
			keys = append(keys, id)
		}
	}
	attempts, err := requestlog.NewestByOffering(ctx, h.pool, keys, routing.WindowSize)
	if err != nil {
		return err
	}
	obs := map[string][]routing.Observation{}
	for offering, as := range attempts {
		for _, a := range as {
			o := routing.Observation{RequestID: a.RequestID, At: a.At, Streamed: a.Streamed, Duration: a.Duration,
				TTFT: a.TTFT, Status: usage.StatusOK}
			if a.Usage != nil {
				o.InputTokens, o.OutputTokens = a.Usage.Input, a.Usage.Output
			}
			switch a.Status { // as the gateway reports an attempt to routing
			case requestlog.GatewayCanceled:
				o.Status = usage.StatusCanceled
			case requestlog.GatewayError, requestlog.GatewayFailedOver:
				o.Status = usage.StatusError
			}
			obs[offering] = append(obs[offering], o)
		}
	}
	for _, o := range h.offerings {
		f := routing.FiguresOf(obs[o.ID])
		if f.Requests < catalog.MinMeasuredRequests {
			continue
		}
		if _, err := h.catalog.MeasureSeeded(ctx, o.ID, int64(f.Requests), f.TTFTP50Ms, f.TTFTP99Ms, f.TokensPerSec); err != nil {
			return err
		}
	}
	return nil
}
