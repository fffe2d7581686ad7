package metering

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the meter's Prometheus figures: events per second (rate of stored), consumer
// lag, rejections by reason, batch latency.
type Metrics struct {
	stored     prometheus.Counter
	rejected   *prometheus.CounterVec
	batchTime  prometheus.Histogram
	batchSize  prometheus.Histogram
	lag        prometheus.Gauge
	ackPending prometheus.Gauge
}

// NewMetrics registers the meter's metrics with reg (nil registers nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		stored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpumarket_meter_events_stored_total", Help: "Usage events metered and stored."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpumarket_meter_events_rejected_total", Help: "Usage events refused, by reason."}, []string{"reason"}),
		batchTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpumarket_meter_batch_seconds", Help: "Time to meter and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpumarket_meter_batch_events", Help: "Events in one batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpumarket_meter_consumer_lag", Help: "Usage events in the stream not yet delivered to the meter."}),
		ackPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpumarket_meter_ack_pending", Help: "Usage events delivered to the meter and not yet acknowledged."}),
	}
	if reg != nil {
		reg.MustRegister(m.stored, m.rejected, m.batchTime, m.batchSize, m.lag, m.ackPending)
	}
	return m
}

func (m *Metrics) observe(res BatchResult, took time.Duration) {
	m.stored.Add(float64(res.Stored))
	for _, r := range res.Rejections {
		m.rejected.WithLabelValues(string(r.Reason)).Inc()
	}
	m.batchTime.Observe(took.Seconds())
	m.batchSize.Observe(float64(res.Stored + len(res.Rejections)))
}

// watchConsumer samples the consumer's pending counts every few seconds, and forgets the
// counted refusals its acknowledgement floor has passed.
func (m *Meter) watchConsumer(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		infoCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		info, err := m.cfg.Consumer.Info(infoCtx)
		if err == nil {
			m.cfg.Metrics.lag.Set(float64(info.NumPending))
			m.cfg.Metrics.ackPending.Set(float64(info.NumAckPending))
			if err := m.forgetCounted(infoCtx, info.AckFloor.Stream); err != nil && ctx.Err() == nil {
				m.cfg.Log.Warn("meter: forgetting counted refusals", "err", err)
			}
		}
		cancel()
	}
}
