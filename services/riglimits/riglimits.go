// Package riglimits keeps any one rig from taking the usage stream from the others, and tells admins which rigs
// are at their limits. See docs/usage-stream.md.
//
// Two limits hold per rig, that is per usage subject usage.<provider_id>.<offering_id>, which only that rig's
// credential may publish on:
//   - what the stream holds of a rig unmetered: the stream's own per-subject limit (usage.StreamOptions
//     .MaxPendingPerRig), which refuses the rig's further events, and only that rig's, when it is reached. A
//     Watcher reads the stream's per-subject state every CheckEvery and reports the rigs at that limit.
//   - how fast a rig publishes: NATS has no per-subject or per-client publish rate limit, so a Watcher counts
//     every event arriving on the usage subjects (a subscription of its own: it sees what the rig published,
//     whether the stream took it or not) over RateWindow. A rig over MaxRate is shut out for Cooldown: its
//     connections are closed on every node (Config.Disconnect) and the platform's answer to the auth callout
//     refuses its credential (Refused, asked by rigauth.Responder) until the cooldown ends, on the embedded
//     server and a cluster alike. The rig's code cannot bypass this: the count is the platform's, of what the
//     server delivered, and the refusal is the server's. Where the platform has no system-account user to close
//     connections with, the Watcher still measures and reports, and the operator acts (docs/usage-stream.md).
//
// A Watcher logs a warning naming the provider and the offering when a rig reaches either limit, exports the
// counts as Prometheus gauges, and gives admins its Report.
package riglimits

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"
)

// Defaults of the settings.
const (
	// DefaultMaxRate is the usage events per second one rig may publish, averaged over RateWindow: about thirty
	// times what a busy rig serving chat sends (64 requests at once, a second each), twice what the stock agent
	// sends at most when it empties its outbox after an outage, and a small share of what one meter meters.
	DefaultMaxRate = 2000
	// DefaultCooldown is how long a rig over its rate stays shut out.
	DefaultCooldown = time.Minute
	// DefaultCheckEvery is how often the stream's per-subject state is read.
	DefaultCheckEvery = 5 * time.Second
	// RateWindow is the time over which a rig's rate is averaged: a rig is over its rate as soon as it has
	// published more than MaxRate x RateWindow events within the last RateWindow.
	RateWindow = 10 * time.Second
)

// windowSeconds is RateWindow in the whole seconds the arrivals are counted in.
const windowSeconds = int64(RateWindow / time.Second)

// Config wires a Watcher.
type Config struct {
	// NATS is a connection of the Watcher's own: it receives a copy of every usage event, and a flood must not
	// make the platform's other subscriptions a slow consumer.
	NATS *nats.Conn
	// JS reads the usage stream's state.
	JS jetstream.JetStream
	// MaxRate is the usage events per second a rig may publish, averaged over RateWindow: DefaultMaxRate when 0,
	// none when negative (rates are still measured and shown).
	MaxRate float64
	// Cooldown is how long a rig over its rate is shut out: DefaultCooldown when 0.
	Cooldown time.Duration
	// Disconnect closes every connection of the rig serving an offering, on every node (rigauth.Revoker). Nil
	// where the platform cannot: rigs over their rate are then reported, not shut out.
	Disconnect func(offeringID string)
	// PendingLimit, when above 0, is the per-rig limit this process asked of the stream
	// (usage.StreamOptions.MaxPendingPerRig). While the stream has another, because a rig's backlog was above
	// it when it was asked for, each check tries to apply it again (usage.ApplyPendingLimit).
	PendingLimit int64
	// CheckEvery is how often the stream's per-subject state is read: DefaultCheckEvery when 0.
	CheckEvery time.Duration
	// Registerer receives the Watcher's gauges; nil registers them nowhere.
	Registerer prometheus.Registerer
	Now        func() time.Time // time.Now when nil
	Log        *slog.Logger     // slog.Default() when nil
}

// Watcher measures and enforces the per-rig limits. Its methods are safe for concurrent use.
type Watcher struct {
	cfg     Config
	limit   uint64 // events within RateWindow above which a rig is over its rate; 0 for none
	metrics metrics

	mu       sync.Mutex
	arrivals map[string]*arrivals   // by subject
	shutOut  map[string]shutOut     // by offering id: refused until then
	overRate map[string]bool        // by subject: over its rate now (reported once per episode)
	stream   streamState            // as of the last check
	atLimit  map[string]bool        // by subject: at the stream's per-rig limit as of the last check
	rigs     map[string]rigIdentity // by subject
	// disconnecting are the Disconnect calls under way, which Run waits for before it returns; once stopped
	// (under mu) no other starts.
	disconnecting sync.WaitGroup
	stopped       bool
}

type rigIdentity struct{ provider, offering string }

// shutOut is a rig refused until a time, and the rate that got it shut out.
type shutOut struct {
	until   time.Time
	subject string
	rate    float64
}

// streamState is what the last check read of the usage stream.
type streamState struct {
	checked      time.Time
	err          error
	pendingLimit int64 // the stream's per-subject limit in force, 0 for none
	pending      uint64
	bySubject    map[string]uint64
}

// New returns a Watcher; Run starts it.
func New(cfg Config) *Watcher {
	if cfg.MaxRate == 0 {
		cfg.MaxRate = DefaultMaxRate
	}
	cfg.Cooldown = cmp.Or(cfg.Cooldown, DefaultCooldown)
	cfg.CheckEvery = cmp.Or(cfg.CheckEvery, DefaultCheckEvery)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	w := &Watcher{cfg: cfg, metrics: newMetrics(cfg.Registerer),
		arrivals: map[string]*arrivals{}, shutOut: map[string]shutOut{}, overRate: map[string]bool{},
		atLimit: map[string]bool{}, rigs: map[string]rigIdentity{}}
	if cfg.MaxRate > 0 {
		w.limit = uint64(cfg.MaxRate * float64(windowSeconds))
	}
	return w
}

// Run counts the usage events as they arrive and checks the stream every CheckEvery until ctx ends. It returns
// once the rigs it was shutting out are disconnected.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.stopped = false
	w.mu.Unlock()
	defer w.stopDisconnecting()
	sub, err := w.cfg.NATS.Subscribe(events.UsageSubject(events.AnyID, events.AnyID), func(m *nats.Msg) { w.arrived(m.Subject) })
	if err != nil {
		return fmt.Errorf("riglimits: watch the usage subjects: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The handler only counts; a flood queues here rather than being dropped unseen.
	if err := sub.SetPendingLimits(1<<20, 512<<20); err != nil {
		return fmt.Errorf("riglimits: %w", err)
	}
	// The server has the subscription once the flush returns: the first check's report then counts arrivals. A
	// connection that is down keeps the subscription and sends it when it is back.
	_ = w.cfg.NATS.FlushTimeout(5 * time.Second)
	t := time.NewTicker(w.cfg.CheckEvery)
	defer t.Stop()
	for {
		if err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Log.Warn("the usage stream's per-rig state could not be read", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refused says whether the rig serving an offering is shut out now: the platform's answer to the auth callout
// (rigauth.Responder) refuses its credential while it is.
func (w *Watcher) Refused(offeringID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.shutOut[offeringID]
	return ok && w.cfg.Now().Before(s.until)
}

// arrived counts one event published on subject, and shuts its rig out when that takes it over its rate.
func (w *Watcher) arrived(subject string) {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.arrivals[subject]
	if a == nil {
		provider, offering, err := events.ParseUsageSubject(subject)
		if err != nil {
			return
		}
		a = &arrivals{head: now.Unix()}
		w.arrivals[subject] = a
		w.rigs[subject] = rigIdentity{provider: provider, offering: offering}
	}
	rig := w.rigs[subject]
	enforced := w.cfg.Disconnect != nil
	if s, ok := w.shutOut[rig.offering]; enforced && ok && now.Before(s.until) {
		// Events still in flight when the rig was shut out: its count starts again when it is let back in.
		return
	}
	n := a.add(now.Unix())
	if w.limit == 0 || n <= w.limit || !enforced && w.overRate[subject] {
		return
	}
	if !w.overRate[subject] {
		w.overRate[subject] = true
		w.metrics.overRate.Inc()
	}
	rate := float64(n) / float64(windowSeconds)
	if !enforced {
		w.cfg.Log.Warn("a rig publishes usage events faster than its limit; this NATS server cannot shut it out: "+
			"revoke its credential if it goes on", "provider", rig.provider, "offering", rig.offering,
			"events_per_second", rate, "limit", w.cfg.MaxRate)
		return
	}
	until := now.Add(w.cfg.Cooldown)
	w.shutOut[rig.offering] = shutOut{until: until, subject: subject, rate: rate}
	*a = arrivals{head: now.Unix()}
	w.metrics.shutOuts.Inc()
	w.cfg.Log.Warn("a rig publishes usage events faster than its limit: its NATS connections are closed and its "+
		"credential refused for the cooldown; its events wait in its outbox", "provider", rig.provider,
		"offering", rig.offering, "events_per_second", rate, "limit", w.cfg.MaxRate, "until", until.UTC())
	if !w.stopped {
		// Off the subscription's goroutine and the lock: the server closes the rig's connections meanwhile.
		w.disconnecting.Go(func() { w.cfg.Disconnect(rig.offering) })
	}
}

// stopDisconnecting lets no further Disconnect start and waits for those under way.
func (w *Watcher) stopDisconnecting() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.disconnecting.Wait()
}

// Check reads the usage stream's per-subject state, applies the per-rig limit this process asked for if it
// waits, logs the rigs that reached the stream's limit, forgets rigs that have gone quiet and updates the gauges.
func (w *Watcher) Check(ctx context.Context) error {
	st, err := w.readStream(ctx)
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.stream.err, w.stream.checked = err, now
		return err
	}
	w.stream = st
	atLimit := map[string]bool{}
	if st.pendingLimit > 0 {
		for subject, n := range st.bySubject {
			if n < uint64(st.pendingLimit) {
				continue
			}
			atLimit[subject] = true
			if !w.atLimit[subject] {
				provider, offering, _ := events.ParseUsageSubject(subject)
				w.cfg.Log.Warn("a rig has as many usage events waiting to be metered as the stream holds for one: "+
					"the stream refuses its further events until the meter catches up", "provider", provider,
					"offering", offering, "pending", n, "limit", st.pendingLimit)
			}
		}
	}
	w.atLimit = atLimit

	sec := now.Unix()
	overRate := 0
	for subject, a := range w.arrivals {
		a.advance(sec)
		over := w.limit > 0 && a.sum > w.limit
		if !over {
			delete(w.overRate, subject)
		} else {
			overRate++
		}
		if a.sum == 0 && !over {
			delete(w.arrivals, subject)
			delete(w.rigs, subject)
		}
	}
	shut := 0
	for offering, s := range w.shutOut {
		if now.Before(s.until) {
			shut++
		} else {
			delete(w.shutOut, offering)
		}
	}
	w.metrics.pending.Set(float64(st.pending))
	w.metrics.atLimit.Set(float64(len(atLimit)))
	w.metrics.overRate.Set(float64(overRate))
	w.metrics.shut.Set(float64(shut))
	return nil
}

func (w *Watcher) readStream(ctx context.Context) (streamState, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if w.cfg.PendingLimit > 0 {
		res, err := usage.ApplyPendingLimit(ctx, w.cfg.JS, w.cfg.PendingLimit)
		switch {
		case err != nil:
			return streamState{}, err
		case !res.Applied:
			w.cfg.Log.Debug("the usage stream's per-rig limit still waits for a rig's backlog", "subject", res.Subject,
				"pending", res.Pending, "limit", w.cfg.PendingLimit)
		}
	}
	s, err := w.cfg.JS.Stream(ctx, events.UsageStream)
	if err != nil {
		return streamState{}, fmt.Errorf("riglimits: stream %s: %w", events.UsageStream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.Below(events.UsagePrefix)))
	if err != nil {
		return streamState{}, fmt.Errorf("riglimits: stream %s: %w", events.UsageStream, err)
	}
	return streamState{checked: w.cfg.Now(), pendingLimit: max(info.Config.MaxMsgsPerSubject, 0),
		pending: info.State.Msgs, bySubject: info.State.Subjects}, nil
}

// Report is what admins see of the per-rig limits.
type Report struct {
	// CheckedAt is when the stream was last read; Error says why that failed, if it did.
	CheckedAt time.Time `json:"checked_at"`
	Error     string    `json:"error,omitempty"`
	// The limits in force.
	MaxPendingPerRig int64   `json:"max_pending_per_rig"` // 0: none
	MaxRate          float64 `json:"max_events_per_second"`
	RateWindow       string  `json:"rate_window"`
	Cooldown         string  `json:"cooldown"`
	Enforced         bool    `json:"rate_enforced"` // rigs over their rate are shut out (false: only reported)
	// PendingEvents is what the stream holds unmetered, of RigsPending rigs.
	PendingEvents uint64 `json:"pending_events"`
	RigsPending   int    `json:"rigs_pending"`
	// Rigs are the rigs at their pending limit, over their rate or shut out: the most pending first.
	Rigs []RigState `json:"rigs"`
}

// RigState is one rig's use of the stream.
type RigState struct {
	ProviderID     string     `json:"provider_id"`
	OfferingID     string     `json:"offering_id"`
	Subject        string     `json:"subject"`
	Pending        uint64     `json:"pending"`
	AtPendingLimit bool       `json:"at_pending_limit"`
	Rate           float64    `json:"events_per_second"` // over the last RateWindow; for a rig shut out, when it was
	OverRate       bool       `json:"over_rate"`
	ShutOutUntil   *time.Time `json:"shut_out_until,omitempty"`
}

// Report says where the rigs stand, as of the last check and the arrivals counted since.
func (w *Watcher) Report() Report {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{CheckedAt: w.stream.checked, MaxPendingPerRig: w.stream.pendingLimit, MaxRate: max(w.cfg.MaxRate, 0),
		RateWindow: RateWindow.String(), Cooldown: w.cfg.Cooldown.String(), Enforced: w.cfg.Disconnect != nil && w.limit > 0,
		PendingEvents: w.stream.pending, RigsPending: len(w.stream.bySubject)}
	if w.stream.err != nil {
		r.Error = w.stream.err.Error()
	}
	flagged := map[string]*RigState{}
	state := func(subject string) *RigState {
		if s := flagged[subject]; s != nil {
			return s
		}
		provider, offering, _ := events.ParseUsageSubject(subject)
		s := &RigState{ProviderID: provider, OfferingID: offering, Subject: subject, Pending: w.stream.bySubject[subject]}
		if a := w.arrivals[subject]; a != nil {
			s.Rate = float64(a.sumAt(now.Unix())) / float64(windowSeconds)
		}
		flagged[subject] = s
		return s
	}
	for subject := range w.atLimit {
		state(subject).AtPendingLimit = true
	}
	for subject := range w.overRate {
		state(subject).OverRate = true
	}
	for _, s := range w.shutOut {
		if now.Before(s.until) {
			// Its count starts again when it is let back in: what it is shown with is what got it shut out.
			u, st := s.until.UTC(), state(s.subject)
			st.ShutOutUntil, st.OverRate, st.Rate = &u, true, max(st.Rate, s.rate)
		}
	}
	for _, s := range flagged {
		r.Rigs = append(r.Rigs, *s)
	}
	slices.SortFunc(r.Rigs, func(a, b RigState) int {
		return cmp.Or(cmp.Compare(b.Pending, a.Pending), cmp.Compare(b.Rate, a.Rate), cmp.Compare(a.Subject, b.Subject))
	})
	return r
}

// arrivals counts one subject's events in the seconds of the last RateWindow.
type arrivals struct {
	buckets [windowSeconds]uint64 // by second, modulo the window
	head    int64                 // the latest second counted
	sum     uint64                // of the buckets
}

// add counts an event at second sec and returns the count within the window.
func (a *arrivals) add(sec int64) uint64 {
	a.advance(sec)
	a.buckets[a.head%windowSeconds]++
	a.sum++
	return a.sum
}

// advance moves the window to end at sec, forgetting the seconds that left it. A clock that went back counts in
// the latest second.
func (a *arrivals) advance(sec int64) {
	if sec <= a.head {
		return
	}
	if sec-a.head >= windowSeconds {
		a.buckets, a.sum = [windowSeconds]uint64{}, 0
	} else {
		for s := a.head + 1; s <= sec; s++ {
			a.sum -= a.buckets[s%windowSeconds]
			a.buckets[s%windowSeconds] = 0
		}
	}
	a.head = sec
}

// sumAt is the count within the window ending at sec, without moving it.
func (a *arrivals) sumAt(sec int64) uint64 {
	b := *a
	b.advance(sec)
	return b.sum
}

type metrics struct {
	pending, atLimit, overRate, shut prometheus.Gauge
	shutOuts                         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpumarket_usage_stream_pending_events",
			Help: "Usage events the stream holds that the meter has not acknowledged."}),
		atLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpumarket_usage_stream_rigs_at_pending_limit",
			Help: "Rigs with as many unmetered events in the usage stream as it holds for one: their further events are refused."}),
		overRate: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpumarket_usage_stream_rigs_over_rate",
			Help: "Rigs that published usage events faster than their limit over the rate window."}),
		shut: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpumarket_usage_stream_rigs_shut_out",
			Help: "Rigs whose NATS credential is refused for a cooldown after publishing faster than their limit."}),
		shutOuts: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpumarket_usage_stream_rig_shut_outs_total",
			Help: "Times a rig was shut out for publishing usage events faster than its limit."}),
	}
	if reg != nil {
		reg.MustRegister(m.pending, m.atLimit, m.overRate, m.shut, m.shutOuts)
	}
	return m
}
