package metering

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/usage"
)

// natsCluster is three nats-server nodes with JetStream, clustered on loopback, each with its own store. A node
// shut down comes back on the same ports and store, as a restarted process on the same machine would.
type natsCluster struct {
	t     *testing.T
	opts  []server.Options // each node's, kept to restart it
	nodes []*server.Server // nil while a node is down
}

func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	c := newNATSCluster(t)
	for i := range 3 {
		c.start(i)
	}
	// JetStream answers only once the nodes have elected a meta leader.
	deadline := time.Now().Add(20 * time.Second)
	for !c.hasMetaLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the three NATS nodes elected no JetStream leader within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// newNATSCluster is the three nodes' options, none started; all are shut down at the test's end.
func newNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	ports := natstest.FreePorts(t, 6) // a client and a cluster port per node
	var routes []string
	for i := range 3 {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3+i]))
	}
	c := &natsCluster{t: t, nodes: make([]*server.Server, 3)}
	store := t.TempDir()
	for i := range 3 {
		c.opts = append(c.opts, server.Options{
			ServerName: fmt.Sprintf("nats-%d", i+1),
			Host:       "127.0.0.1",
			Port:       ports[i],
			JetStream:  true,
			StoreDir:   filepath.Join(store, fmt.Sprintf("nats-%d", i+1)),
			Cluster:    server.ClusterOpts{Name: "gpumarket", Host: "127.0.0.1", Port: ports[3+i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
			NoLog:      true,
			NoSigs:     true,
		})
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

// start starts node i (again) on its ports and store.
func (c *natsCluster) start(i int) {
	c.t.Helper()
	opts := c.opts[i] // a copy: the server fills in its options
	s, err := server.NewServer(&opts)
	if err != nil {
		c.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		c.t.Fatalf("NATS node %d is not ready for clients", i+1)
	}
	c.nodes[i] = s
}

// stop shuts node i down, as a machine's failure would end the process.
func (c *natsCluster) stop(i int) {
	if s := c.nodes[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.nodes[i] = nil
	}
}

func (c *natsCluster) hasMetaLeader() bool {
	for _, s := range c.nodes {
		if s != nil && s.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// urls is the client URLs of the nodes, starting from node first, as a client's list of seed servers.
func (c *natsCluster) urls(first int) string {
	var out []string
	for k := range 3 {
		out = append(out, "nats://127.0.0.1:"+strconv.Itoa(c.opts[(first+k)%3].Port))
	}
	return strings.Join(out, ",")
}

// node is the index of the node named name.
func (c *natsCluster) node(name string) int {
	for i, o := range c.opts {
		if o.ServerName == name {
			return i
		}
	}
	c.t.Fatalf("no NATS node %q", name)
	return -1
}

// The usage stream replicated on three NATS nodes keeps every rig's usage through the loss of one of them: the
// node leading the stream dies while rigs publish and the meter meters, the other two elect a leader and carry
// on, rigs publish while it is down, it comes back on its store and catches up. Every event a rig published and
// had acknowledged is metered exactly once, and the ledger balances to the picodollar.
func TestClusteredNATSLosesNoUsageWhenANodeDies(t *testing.T) {
	cluster := startNATSCluster(t)
	e := setupMeterOn(t, cluster.urls(0), usage.StreamOptions{Replicas: 3, AckWait: 2 * time.Second})
	ctx := context.Background()

	info, err := e.js.Stream(ctx, events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	si := info.CachedInfo()
	if si.Config.Replicas != 3 || si.Cluster == nil || len(si.Cluster.Replicas) != 2 {
		t.Fatalf("the usage stream has %d replicas (cluster %+v), want 3: a leader and two followers", si.Config.Replicas, si.Cluster)
	}
	leader := cluster.node(si.Cluster.Leader)
	rejected, err := e.js.Stream(ctx, events.RejectedStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := rejected.CachedInfo().Config.Replicas; n != 3 {
		t.Errorf("the stream of refused events has %d replicas, want 3", n)
	}

	// Four rigs, two providers' offerings each, every request's gateway record written and its event signed.
	const rigs, perRig = 4, 150
	const total = rigs * perRig
	type rigEvents struct {
		subject string
		ids     []string
		bodies  [][]byte
	}
	var sims []rigEvents
	var wantCharge, wantPayable money.Pico
	wantOwed := map[string]money.Pico{}
	for r := range rigs {
		provider := e.provider
		if r%2 == 1 {
			provider = e.other
		}
		rig := &testRig{provider: provider, offering: e.newOffering(t, provider, "standard"), tier: "standard",
			customer: e.customer, apiKey: e.apiKey, priceID: e.price, askIn: testAskIn, askOut: testAskOut}
		sim := rigEvents{subject: events.UsageSubject(provider, rig.offering)}
		for i := range perRig {
			in, out := int64(100+r*10+i), int64(50+i)
			id, body, _ := e.routed(t, route{rig: rig, in: in, out: out, at: e.now.Add(-time.Minute)})
			sim.ids, sim.bodies = append(sim.ids, id), append(sim.bodies, body)
			wantCharge += charge(in, out)
			wantPayable += payable(in, out)
			wantOwed[provider] += payable(in, out)
		}
		sims = append(sims, sim)
	}

	meterCtx, stopMeter := context.WithCancel(ctx)
	metered := make(chan error, 1)
	go func() { metered <- e.meter.Run(meterCtx) }()

	// The rigs publish as the agent does: each event with its id, sent again until the stream acknowledges it.
	// Each rig prefers a different node. Events of the second third wait until the leader is down, those of the
	// last until it is back, so that rigs publish before, during and after; the first third is still being
	// published when the leader dies.
	var acked, ackedWhileDown atomic.Int64
	var down atomic.Bool
	phase := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	close(phase[0])
	var resent atomic.Int64
	var wg sync.WaitGroup
	for r, sim := range sims {
		nc, err := nats.Connect(cluster.urls(r%3), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
			nats.DontRandomize())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range sim.ids {
				<-phase[i*3/perRig]
				time.Sleep(2 * time.Millisecond) // a rig's pace: its requests end one after another
				for attempt := 0; ; attempt++ {
					msg := nats.NewMsg(sim.subject)
					msg.Data = sim.bodies[i]
					msg.Header.Set(usage.HeaderMsgID, sim.ids[i])
					pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					_, err := js.PublishMsg(pctx, msg)
					cancel()
					if err == nil {
						acked.Add(1)
						if down.Load() {
							ackedWhileDown.Add(1)
						}
						break
					}
					if attempt == 0 {
						resent.Add(1)
					}
					if attempt > 200 {
						t.Errorf("rig %d: event %s never acknowledged: %v", r, sim.ids[i], err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}

	waitFor := func(what string, within time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s (%d events acknowledged)", what, within, acked.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("a sixth of the events acknowledged", 30*time.Second, func() bool { return acked.Load() >= total/6 })
	killedAt, meteredAtKill := acked.Load(), e.count(t, `SELECT count(*) FROM usage_events`)
	down.Store(true)
	cluster.stop(leader)
	close(phase[1])
	waitFor("two thirds of the events acknowledged with the leader down", 40*time.Second,
		func() bool { return acked.Load() >= 2*total/3 })
	// The meter goes on with the leader down: it meters what was published meanwhile (each
	// batch a quarter of a second after its events came, MeterConfig.RecordLag).
	meteredWhileDown := 0
	waitFor("a third of the events metered with the leader down", 20*time.Second, func() bool {
		meteredWhileDown = e.count(t, `SELECT count(*) FROM usage_events`) - meteredAtKill
		return meteredWhileDown >= total/3
	})
	down.Store(false)
	cluster.start(leader)
	close(phase[2])
	wg.Wait()
	if t.Failed() {
		stopMeter()
		t.FailNow()
	}
	waitFor("the meter metered every event", 40*time.Second, func() bool {
		ci, err := e.cons.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && e.count(t, `SELECT count(*) FROM usage_events`) >= total
	})
	stopMeter()
	if err := <-metered; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the meter stopped: %v", err)
	}
	// The restarted node has caught up on the stream.
	waitFor("the restarted node catches up on the usage stream", 20*time.Second, func() bool {
		s := cluster.nodes[leader]
		return s.JetStreamIsStreamCurrent("$G", events.UsageStream)
	})
	t.Logf("%d events from %d rigs: the stream's leader %s shut down after %d were acknowledged; while it was down %d were acknowledged "+
		"and %d metered; %d events had to be sent again", total, rigs, cluster.opts[leader].ServerName, killedAt,
		ackedWhileDown.Load(), meteredWhileDown, resent.Load())
	if ackedWhileDown.Load() < total/3 {
		t.Errorf("only %d events acknowledged while a node was down, want at least %d", ackedWhileDown.Load(), total/3)
	}
	if meteredWhileDown < total/3 {
		t.Errorf("only %d events metered while a node was down, want at least %d: the meter did not go on", meteredWhileDown, total/3)
	}

	// Each event acknowledged to a rig is one usage row, none missing, none twice.
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != total {
		t.Errorf("%d usage rows, want %d: one per event acknowledged", n, total)
	}
	var all []string
	for _, sim := range sims {
		all = append(all, sim.ids...)
	}
	if n := e.count(t, `SELECT count(DISTINCT event_id) FROM usage_events WHERE event_id = ANY($1)`, all); n != total {
		t.Errorf("%d of the %d events published are metered", n, total)
	}
	if n := e.count(t, `SELECT coalesce(sum(requests), 0)::int FROM usage_hourly`); n != total {
		t.Errorf("the rollups count %d requests, want %d", n, total)
	}
	if rej := e.rejected(t); len(rej) != 0 {
		t.Errorf("events refused: %v", rej)
	}
	checkLedgerBalances(t, e)
	if got := e.balance(t, ledger.AccountCustomerCredit, e.customer); !got.Equal(-wantCharge) {
		t.Errorf("the customer paid %s, want %s", got.Neg(), wantCharge)
	}
	for provider, owed := range wantOwed {
		if got := e.balance(t, ledger.AccountProviderPayable, provider); !got.Equal(owed) {
			t.Errorf("provider %s is owed %s, want %s", provider, got, owed)
		}
	}
	if got := e.balance(t, ledger.AccountPlatformRevenue, ""); !got.Equal(wantCharge - wantPayable) {
		t.Errorf("the platform earned %s, want %s", got, wantCharge-wantPayable)
	}
	t.Logf("metered %d usage rows; the customer paid %s, the providers are owed %s", total, wantCharge, wantPayable)
}
