package riglimits_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/riglimits"
	"github.com/gpumarket/gpumarket/services/usage"
)

var rigKey = []byte("rig-key-for-the-flood-tests-0123456789")

// The two rigs of the tests, each logging in with its own credential, as the platform's embedded server lets
// rigs in.
var (
	flooder = rig{provider: "prov-flood", offering: "off-flood"}
	calm    = rig{provider: "prov-calm", offering: "off-calm"}
)

type rig struct{ provider, offering string }

func (r rig) subject() string { return events.UsageSubject(r.provider, r.offering) }

type platform struct {
	srv     *server.Server
	js      jetstream.JetStream
	watcher *riglimits.Watcher
	reg     *prometheus.Registry
	logs    *syncBuffer
}

// startPlatform starts an embedded server that lets rigs in as the platform does (the auth callout answered by
// rigauth.Responder, refusing the rigs the watcher shuts out), the usage stream and a watcher with its own
// connection, which shuts rigs out through the system account (rigauth.Revoker).
func startPlatform(t *testing.T, stream usage.StreamOptions, cfg riglimits.Config) *platform {
	t.Helper()
	p := &platform{logs: &syncBuffer{}, reg: prometheus.NewRegistry()}
	log := slog.New(slog.NewTextHandler(p.logs, nil))
	var watcher atomic.Pointer[riglimits.Watcher]
	providers := map[string]string{flooder.offering: flooder.provider, calm.offering: calm.provider}
	entry := natstest.StartRigEntry(t, natsserver.EmbeddedOptions{}, &rigauth.Responder{RigKey: rigKey,
		RigOf:   func(_ context.Context, id string) (string, int, bool) { p, ok := providers[id]; return p, 1, ok },
		Refused: func(id string) bool { w := watcher.Load(); return w != nil && w.Refused(id) }})
	srv := entry.Server
	p.srv = srv
	platformURL := entry.PlatformURL
	nc, js, err := events.Connect(t.Context(), platformURL, "platform", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p.js = js
	if _, err := usage.EnsureStreams(t.Context(), js, stream); err != nil {
		t.Fatal(err)
	}
	wnc, _, err := events.Connect(t.Context(), platformURL, "platform-riglimits", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wnc.Close)
	cfg.NATS, cfg.JS, cfg.Registerer, cfg.Log = wnc, js, p.reg, log
	cfg.Disconnect = func(offeringID string) {
		_, _ = entry.Revoker.Disconnect(context.Background(), events.RigUsername(offeringID))
	}
	p.watcher = riglimits.New(cfg)
	watcher.Store(p.watcher)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.watcher.Run(ctx); err != nil {
			t.Errorf("watcher: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p
}

// connect logs a rig in with its own credential, as its agent would, and keeps reconnecting as a rig does.
func (p *platform) connect(t *testing.T, r rig, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	u, _ := url.Parse(p.srv.ClientURL())
	opts = append([]nats.Option{nats.UserInfo(events.RigUsername(r.offering), events.RigPassword(rigKey, r.offering)),
		nats.CustomInboxPrefix(events.RigInboxPrefix(r.provider, r.offering)), nats.Name(r.offering)}, opts...)
	nc, err := nats.Connect(u.String(), opts...)
	if err != nil {
		t.Fatalf("%s connects: %v", r.offering, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// meter stands for the meter: it takes the usage stream's events from the meter's consumer, in batches that
// take perBatch to commit, acknowledges them, and notes when each arrived.
type meter struct {
	mu        sync.Mutex
	delivered map[string]delivery // by message id
	bySubject map[string]int
	total     int
}

// delivery is when an event reached the meter, and how many had before it.
type delivery struct {
	at      time.Time
	ordinal int
}

func (p *platform) runMeter(t *testing.T, batch int, perBatch time.Duration) (*meter, context.CancelFunc) {
	t.Helper()
	m := &meter{delivered: map[string]delivery{}, bySubject: map[string]int{}}
	cons, err := p.js.Consumer(t.Context(), events.UsageStream, events.UsageConsumer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			msgs, err := cons.Fetch(batch, jetstream.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				continue
			}
			var got []jetstream.Msg
			for msg := range msgs.Messages() {
				got = append(got, msg)
			}
			time.Sleep(perBatch)
			now := time.Now()
			m.mu.Lock()
			for _, msg := range got {
				m.delivered[msg.Headers().Get(jetstream.MsgIDHeader)] = delivery{at: now, ordinal: m.total}
				m.bySubject[msg.Subject()]++
				m.total++
				_ = msg.Ack()
			}
			m.mu.Unlock()
		}
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return m, stop
}

func (m *meter) at(id string) (delivery, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.delivered[id]
	return d, ok
}

// metered is how many events the meter has received.
func (m *meter) metered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total
}

func (m *meter) count(subject string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bySubject[subject]
}

// flood publishes n events on the rig's subject as fast as the connection takes them, in windows of 4,096 awaited
// acknowledgements, and returns how many the stream took and its refusals.
func flood(t *testing.T, js jetstream.JetStream, r rig, n int) (accepted int, refused []*usage.RefusedError, other []error) {
	t.Helper()
	body := []byte(`{"specversion":"1.0","type":"market.gpumarket.usage.v1","data":{"input_tokens":10000000}}`)
	for sent := 0; sent < n && len(other) == 0; {
		futures := make([]jetstream.PubAckFuture, 0, 4096)
		for ; sent < n && len(futures) < cap(futures); sent++ {
			f, err := js.PublishAsync(r.subject(), body, jetstream.WithMsgID(fmt.Sprintf("%s-%d-%d", r.offering, n, sent)))
			if err != nil {
				other = append(other, err)
				break
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
				accepted++
			case err := <-f.Err():
				if ref := usage.Refused(r.subject(), err); ref != nil {
					refused = append(refused, ref)
				} else {
					other = append(other, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no answer to a flooding publish in 20 s")
			}
		}
	}
	return accepted, refused, other
}

// publishCalmly publishes n ordinary events one after another and returns when each was acknowledged, with how
// many events the meter had received then (m may be nil), and the errors, none expected.
func publishCalmly(t *testing.T, js jetstream.JetStream, r rig, n int, every time.Duration, m *meter) (map[string]delivery, []error) {
	t.Helper()
	acked := map[string]delivery{}
	var errs []error
	for i := range n {
		id := fmt.Sprintf("%s-%d", r.offering, i)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err := js.Publish(ctx, r.subject(), []byte(`{"data":{"input_tokens":12,"output_tokens":40}}`), jetstream.WithMsgID(id))
		cancel()
		if err != nil {
			errs = append(errs, err)
		} else {
			acked[id] = delivery{at: time.Now()}
			if m != nil {
				acked[id] = delivery{at: acked[id].at, ordinal: m.metered()}
			}
		}
		time.Sleep(every)
	}
	return acked, errs
}

// TestAFloodingRigCannotCrowdOutTheOthers: one rig publishes 30,000 events as fast as its connection takes them
// while another publishes 100 ordinary events, and the meter meters 10,000 events a second. The stream holds at
// most 1,000 unmetered events of a rig: the flood's excess is refused, each refusal naming the flooder's subject;
// every one of the other rig's events gets in and reaches the meter behind at most the flooder's 1,000, where
// without the limit it would wait behind the whole flood.
func TestAFloodingRigCannotCrowdOutTheOthers(t *testing.T) {
	t.Parallel()
	const perRig, floodSize = 1_000, 30_000
	p := startPlatform(t, usage.StreamOptions{MaxPendingPerRig: perRig},
		riglimits.Config{MaxRate: -1, CheckEvery: time.Hour}) // the stream's per-rig limit alone
	m, stopMeter := p.runMeter(t, 200, 20*time.Millisecond)
	_, floodJS := p.connect(t, flooder)
	_, calmJS := p.connect(t, calm)

	var accepted int
	var refused []*usage.RefusedError
	var floodErrs []error
	flooding := make(chan struct{})
	go func() {
		defer close(flooding)
		accepted, refused, floodErrs = flood(t, floodJS, flooder, floodSize)
	}()
	time.Sleep(50 * time.Millisecond) // the flood is under way
	acked, calmErrs := publishCalmly(t, calmJS, calm, 100, 5*time.Millisecond, m)
	<-flooding

	if len(calmErrs) != 0 || len(acked) != 100 {
		t.Fatalf("the calm rig had %d of its 100 events taken; errors: %v", len(acked), calmErrs)
	}
	if len(floodErrs) != 0 {
		t.Fatalf("the flood failed otherwise than by refusals: %v", floodErrs[0])
	}
	if accepted+len(refused) != floodSize || len(refused) == 0 {
		t.Fatalf("of the flood's %d events %d were taken and %d refused: want the excess refused", floodSize, accepted, len(refused))
	}
	for _, r := range refused {
		if r.Reason != usage.RefusedRigPending || r.Subject != flooder.subject() || !strings.Contains(r.Error(), flooder.subject()) {
			t.Fatalf("refusal %q (%s): want the per-rig limit, naming %s", r, r.Reason, flooder.subject())
		}
	}
	// How soon: the events the meter received between the stream's taking a calm event and that event are the
	// queue ahead of it, at most what the stream holds of the flooder (and a batch in flight), whatever the
	// machine's speed; and in time, well within the five seconds of a request's usage showing on the usage page.
	var slowest time.Duration
	var most int
	for id, taken := range acked {
		var got delivery
		waitFor(t, "the calm rig's event "+id+" at the meter", func() bool {
			var ok bool
			got, ok = m.at(id)
			return ok
		})
		slowest, most = max(slowest, got.at.Sub(taken.at)), max(most, got.ordinal-taken.ordinal)
	}
	if most > perRig+200 {
		t.Errorf("%d events reached the meter ahead of a calm rig's event after the stream took it, want at most the flooder's %d and a batch", most, perRig)
	}
	if slowest > 5*time.Second {
		t.Errorf("a calm rig's event reached the meter %s after the stream took it", slowest)
	}
	t.Logf("flood: %d taken, %d refused; the calm rig's 100 events reached the meter within %s of being taken, behind at most %d others",
		accepted, len(refused), slowest.Round(time.Millisecond), most)

	// With the meter stopped, the flooder fills its share again: the admins see it at its limit, the other not.
	stopMeter()
	if got := m.count(calm.subject()); got != 100 {
		t.Errorf("the meter received %d of the calm rig's events, want each of the 100 once", got)
	}
	if _, more, _ := flood(t, floodJS, flooder, 2*perRig); len(more) < perRig {
		t.Fatalf("%d refused of %d published over a stopped meter, want at least %d", len(more), 2*perRig, perRig)
	}
	if err := p.watcher.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep := p.watcher.Report()
	if rep.MaxPendingPerRig != perRig || len(rep.Rigs) != 1 {
		t.Fatalf("report %+v: want the limit of %d and the flooder alone flagged", rep, perRig)
	}
	if r := rep.Rigs[0]; r.ProviderID != flooder.provider || r.OfferingID != flooder.offering || r.Pending != perRig || !r.AtPendingLimit {
		t.Errorf("flagged %+v, want %s at its limit of %d", r, flooder.offering, perRig)
	}
	if got := metricValue(t, p.reg, "gpumarket_usage_stream_rigs_at_pending_limit"); got != 1 {
		t.Errorf("gpumarket_usage_stream_rigs_at_pending_limit = %g, want 1", got)
	}
	p.logs.expectLine(t, "as many usage events waiting to be metered", "provider=prov-flood", "offering=off-flood", "pending=1000")
}

// TestARigOverItsRateIsShutOutForACooldown: a rig may publish 1,000 events a second over ten seconds. One publishes
// 20,000 as fast as it can: once it has published 10,000, its connection is closed and its credential refused for
// the cooldown, however often it tries again, while the other rig publishes as before; after the cooldown it gets
// back in.
func TestARigOverItsRateIsShutOutForACooldown(t *testing.T) {
	t.Parallel()
	const cooldown = 2 * time.Second
	p := startPlatform(t, usage.StreamOptions{MaxPendingPerRig: 100_000},
		riglimits.Config{MaxRate: 1000, Cooldown: cooldown, CheckEvery: 100 * time.Millisecond})
	p.runMeter(t, 1000, 0)
	var reconnects []time.Time
	var mu sync.Mutex
	floodNC, floodJS := p.connect(t, flooder, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.IgnoreAuthErrorAbort(), nats.ReconnectHandler(func(*nats.Conn) {
			mu.Lock()
			reconnects = append(reconnects, time.Now())
			mu.Unlock()
		}))
	_, calmJS := p.connect(t, calm)

	start := time.Now()
	accepted, _, _ := flood(t, floodJS, flooder, 20_000)
	if accepted >= 20_000 {
		t.Fatalf("the stream took all %d of the flood", accepted)
	}
	waitFor(t, "the flooder to be shut out", func() bool { return p.watcher.Refused(flooder.offering) })
	shutAt := time.Now()
	if floodNC.IsConnected() {
		t.Error("the flooder is still connected")
	}
	if p.watcher.Refused(calm.offering) {
		t.Error("the calm rig is shut out too")
	}
	// During the cooldown the flooder's right credential is refused, and the calm rig publishes as before.
	if nc, err := nats.Connect(p.srv.ClientURL(), nats.UserInfo(events.RigUsername(flooder.offering), events.RigPassword(rigKey, flooder.offering)),
		nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("the flooder's credential was accepted during its cooldown")
	}
	acked, errs := publishCalmly(t, calmJS, calm, 100, 0, nil)
	if len(errs) != 0 || len(acked) != 100 {
		t.Errorf("the calm rig had %d of 100 events taken during the cooldown: %v", len(acked), errs)
	}
	rep := p.watcher.Report()
	var flagged *riglimits.RigState
	for i := range rep.Rigs {
		if rep.Rigs[i].OfferingID == flooder.offering {
			flagged = &rep.Rigs[i]
		}
	}
	if !rep.Enforced || len(rep.Rigs) != 1 || flagged == nil || !flagged.OverRate || flagged.ShutOutUntil == nil ||
		flagged.ProviderID != flooder.provider || flagged.Rate <= 1000 {
		t.Fatalf("report %+v: want the flooder alone, over its rate of 1000/s and shut out", rep)
	}
	if got := metricValue(t, p.reg, "gpumarket_usage_stream_rig_shut_outs_total"); got != 1 {
		t.Errorf("gpumarket_usage_stream_rig_shut_outs_total = %g, want 1", got)
	}
	p.logs.expectLine(t, "faster than its limit", "provider=prov-flood", "offering=off-flood")

	waitFor(t, "the flooder back after its cooldown", floodNC.IsConnected)
	back := time.Now()
	mu.Lock()
	defer mu.Unlock()
	for _, at := range reconnects {
		if at.Before(shutAt.Add(cooldown - time.Second)) {
			t.Errorf("the flooder reconnected %s after it was shut out, within its cooldown of %s", at.Sub(shutAt), cooldown)
		}
	}
	if back.Sub(start) < cooldown {
		t.Errorf("the flooder was back %s after it began, before its cooldown of %s ended", back.Sub(start), cooldown)
	}
	if _, err := floodJS.Publish(t.Context(), flooder.subject(), []byte(`{}`), jetstream.WithMsgID("after-cooldown")); err != nil {
		t.Errorf("the flooder cannot publish after its cooldown: %v", err)
	}
}

// metricValue is the value of a gauge or counter without labels in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			m := f.GetMetric()[0]
			return m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// expectLine fails unless one line of the log holds every part.
func (b *syncBuffer) expectLine(t *testing.T, parts ...string) {
	t.Helper()
	b.mu.Lock()
	text := b.buf.String()
	b.mu.Unlock()
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return
		}
	}
	t.Errorf("no log line holds %q:\n%s", parts, text)
}
