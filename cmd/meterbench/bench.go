package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/cmd/internal/cpuuse"
	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// stallTimeout is how long the benchmark waits for the meter's next commit before it gives up.
const stallTimeout = 2 * time.Minute

// bench runs the whole benchmark; see the package comment.
func bench(ctx context.Context, args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.batchSize == 0 {
		o.batchSize = metering.DefaultBatchSize
	}
	env, err := setup(ctx, o.events)
	if err != nil {
		return err
	}
	env.workload.Rate = o.rate
	defer env.close()

	// The warm-up round brings the meter, the NATS server, PostgreSQL and the machine to the
	// state they meter in (caches, connections, the Go runtime's heap, the indexes' top
	// pages); the figures come from the measured round only, and the exactly-once check
	// covers both.
	warm, measured, backlog, paced := env.workload, env.workload, env.workload, env.workload
	warm.From, warm.Events = 0, o.warmup
	measured.From, measured.Events = o.warmup, o.events
	backlog.From, backlog.Events = o.warmup+o.events, o.events
	paced.From, paced.Events = o.warmup+2*o.events, o.paced
	rounds := []workload{warm, measured, backlog}
	if o.paced > 0 {
		rounds = append(rounds, paced)
	}
	// The gateway's records of every round's requests are there before their events, as the
	// gateway writes them when it relays a response: the gateway's work, not the meter's.
	start := time.Now()
	records, err := writeGatewayRecords(ctx, env.db.Pool, rounds...)
	if err != nil {
		return err
	}
	progress("the gateway's records of %d requests written by COPY in %s", records, time.Since(start).Round(time.Millisecond))
	settle(ctx, env.db.Pool)
	if o.warmup > 0 {
		if _, err := env.meter(ctx, o, warm, warmUpRound); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	if err := holdForCeiling(ctx, env.js, o.warmup); err != nil {
		return err
	}
	res, err := env.meter(ctx, o, measured, measuredRound)
	if err != nil {
		return err
	}
	drained, err := env.meter(ctx, o, backlog, backlogRound)
	if err != nil {
		return fmt.Errorf("backlog round: %w", err)
	}

	jsRate, err := jetStreamCeiling(ctx, env.srv.ClientURL(), o.warmup, o.events, o.batchSize)
	if err != nil {
		return err
	}
	progress("ceiling: JetStream fetch and ack of the same %d messages: %.0f events/s", o.events, jsRate)
	// The ceiling's consumer has read what it measures: removed, it holds back none of the
	// paced round's messages.
	if err := env.js.DeleteConsumer(ctx, events.UsageStream, ceilingConsumer(o.warmup).Durable); err != nil {
		return fmt.Errorf("ceiling consumer: %w", err)
	}
	pgRate, err := copyCeiling(ctx, env.db.Pool, o.warmup, o.batchSize)
	if err != nil {
		return err
	}
	progress("ceiling: pgx CopyFrom of the same %d rows in batches of %d into tables shaped like usage_event_keys and usage_events: %.0f events/s",
		o.events, o.batchSize, pgRate)

	// The paced round: the rigs publish at a share of what the meter did flat out, as they do
	// on an ordinary day, and the latency is what an event waits at a load the meter keeps up
	// with rather than the queue of a backlog.
	var slow runResult
	if o.paced > 0 {
		// The ceilings' two million rows are the benchmark's own writing, not an ordinary day's:
		// written out before the round, as the earlier runs' are before the run (settle), so that
		// the checkpointer and the kernel do not flush them under the paced round's commits.
		settle(ctx, env.db.Pool)
		paced.Rate = max(1, int(pacedShare*res.rate))
		if slow, err = env.meter(ctx, o, paced, pacedRound); err != nil {
			return fmt.Errorf("paced round: %w", err)
		}
	}

	if err := verify(ctx, env.db.Pool, rounds...); err != nil {
		return err
	}
	progress("exactly once: %d distinct events stored (%d of the warm-up, %d measured while published, %d measured from a backlog, %d paced), none rejected or flagged; charges, ledger, rollups and key spend agree with the workload",
		o.warmup+2*o.events+o.paced, o.warmup, o.events, o.events, o.paced)

	ceiling := min(jsRate, pgRate)
	fmt.Printf("publish to commit: p50 %s; p99 %s\n", res.p50.Round(time.Millisecond), res.p99.Round(time.Millisecond))
	if o.paced > 0 {
		fmt.Printf("publish to commit at %.0f%% of the meter's rate (%d events/s): p50 %s; p99 %s\n", 100*pacedShare,
			paced.Rate, slow.p50.Round(time.Millisecond), slow.p99.Round(time.Millisecond))
	}
	fmt.Printf("meter while the rigs publish: %.0f events/s; ceiling: %.0f events/s; ratio: %.2f\n", res.rate, ceiling, res.rate/ceiling)
	fmt.Printf("meter: %.0f events/s; ceiling: %.0f events/s; ratio: %.2f\n", drained.rate, ceiling, drained.rate/ceiling)
	return nil
}

// settle lets the run start on a quiet machine: earlier work's dirty pages written out (a
// previous run leaves a gigabyte or more of them, and a kernel writing them back charges the
// processes that write next, the NATS server first) and PostgreSQL checkpointed, so that its
// checkpointer does not flush the previous run's pages during this one.
func settle(ctx context.Context, pool *pgxpool.Pool) {
	syscall.Sync()
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		progress("PostgreSQL not checkpointed before the run (%v): earlier work may be written back during it", err)
		return
	}
	progress("dirty pages written out and PostgreSQL checkpointed before the run")
}

// benchEnv is what a run works on: its database, its NATS server and the workload.
type benchEnv struct {
	db       *scratchdb.Database
	srv      *server.Server
	natsDir  string
	nc       *nats.Conn
	js       jetstream.JetStream
	consumer jetstream.Consumer
	workload workload
	tickets  *ticket.Signer
}

// setup creates the database with the workload's customers and offerings, and the NATS server
// with the usage stream and the meter's consumer, as `gpumarket meter` creates them.
func setup(ctx context.Context, events int) (_ *benchEnv, err error) {
	env := &benchEnv{}
	defer func() {
		if err != nil {
			env.close()
		}
	}()
	if env.db, err = scratchdb.Create(ctx, "gpumarket_bench_", progress); err != nil {
		return nil, err
	}
	if env.workload, err = seed(ctx, env.db.Pool, events); err != nil {
		return nil, err
	}
	progress("database %s created: %d customers, %d offerings", env.db.Name, len(env.workload.Customers), len(env.workload.Offerings))
	if err := env.startNATS(ctx); err != nil {
		return nil, err
	}
	env.workload.NATSURL, env.workload.TicketKey = env.srv.ClientURL(), make([]byte, 32)
	_, _ = rand.Read(env.workload.TicketKey)
	env.tickets, err = ticket.NewSigner(env.workload.TicketKey)
	return env, err
}

func (env *benchEnv) startNATS(ctx context.Context) (err error) {
	if env.natsDir, err = os.MkdirTemp("", "meterbench-nats-"); err != nil {
		return err
	}
	// As gpumarket does when it embeds the server.
	progress("the meter's process collects garbage at GOGC=%d", natsserver.TuneGCForEmbedded(gogcSet()))
	if env.srv, err = natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: env.natsDir}); err != nil {
		return err
	}
	if env.nc, env.js, err = events.Connect(ctx, env.srv.ClientURL(), "meterbench-meter", nil); err != nil {
		return err
	}
	// The publisher stands for rigs releasing a backlog at once, faster than the meter meters:
	// the stream has no per-rig limit on what it holds, so that the benchmark measures the meter
	// and not the limit.
	env.consumer, err = usage.EnsureStreams(ctx, env.js, usage.StreamOptions{MaxPendingPerRig: -1})
	return err
}

// close stops the NATS server, removes its directory and drops the database.
func (env *benchEnv) close() {
	if env.nc != nil {
		env.nc.Close()
	}
	if env.srv != nil {
		env.srv.Shutdown()
		env.srv.WaitForShutdown()
	}
	if env.natsDir != "" {
		_ = os.RemoveAll(env.natsDir)
	}
	if env.db != nil {
		env.db.Drop()
	}
}

// pacedShare is the share of the meter's flat-out rate the paced round publishes at.
const pacedShare = 0.4

// round is which of the benchmark's rounds a run of the meter is.
type round string

const (
	warmUpRound   round = "warm-up round"
	measuredRound round = "measured round"
	backlogRound  round = "backlog round"
	pacedRound    round = "paced round"
)

// meter runs the meter while the publisher publishes a round of the workload, until every
// event of it is metered, and returns the round's figures; only the measured round is
// profiled, and the warm-up round is not reported.
func (env *benchEnv) meter(ctx context.Context, o options, w workload, r round) (runResult, error) {
	run := newMeterRun(w.Events)
	// The meter feeds the routers what it stored after every commit, as gpumarket's does.
	feed := metering.NewFeed(env.nc, nil)
	m := metering.NewMeter(metering.MeterConfig{
		Pool: env.db.Pool, Ledger: ledger.NewLedger(env.db.Pool, nil), Tickets: env.tickets, JS: env.js,
		Consumer: env.consumer, BatchSize: o.batchSize,
		OnCommit: func(res metering.BatchResult, committed time.Time) {
			run.committed(res, committed)
			feed.OnCommit(res, committed)
		},
	})
	meterCtx, stopMeter := context.WithCancel(ctx)
	meterErr := make(chan error, 1)
	meterRunning := false
	runMeter := func() {
		run.started, meterRunning = time.Now(), true
		go func() {
			meterErr <- m.Run(meterCtx)
			close(meterErr)
		}()
	}
	defer func() {
		stopMeter()
		if !meterRunning {
			return
		}
		for range meterErr {
		}
	}()

	progress("%s: preparing %d events in a separate process, the publisher", r, w.Events)
	pub, err := startPublisher(ctx, w)
	if err != nil {
		return runResult{}, err
	}
	var report publishReport
	if r == backlogRound {
		// The rigs publish the whole round while the meter is stopped, as after an outage of
		// the meter or a burst of held events; the meter is timed from its start on the backlog.
		progress("%s: publishing with the meter stopped", r)
		if err := pub.start(); err != nil {
			return runResult{}, err
		}
		if report, err = pub.wait(); err != nil {
			return runResult{}, err
		}
		progress("%s: %d events waiting in the stream; the meter starts", r, w.Events)
	} else {
		runMeter()
	}
	if r == backlogRound && o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return runResult{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return runResult{}, err
		}
		defer pprof.StopCPUProfile()
	}
	cpuBefore := cpuuse.Take(env.db.Name)
	var published chan error
	if r == backlogRound {
		runMeter()
	} else {
		progress("%s: publishing while the meter runs", r)
		if err := pub.start(); err != nil {
			return runResult{}, err
		}
		published = make(chan error, 1)
		go func() {
			var err error
			report, err = pub.wait()
			published <- err
		}()
	}

	var cpu cpuuse.Use
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case err := <-published:
			if err != nil {
				return runResult{}, err
			}
			published = nil
		case <-run.done:
			running = false
			cpu = cpuuse.Take(env.db.Name).Since(cpuBefore)
		case <-tick.C:
			stored, rejected, idle := run.progress()
			progress("metered %d events, rejected %d", stored, rejected)
			if idle > stallTimeout {
				return runResult{}, fmt.Errorf("the meter committed nothing for %s", idle.Round(time.Second))
			}
		case <-ctx.Done():
			return runResult{}, ctx.Err()
		}
	}
	if published != nil {
		if err := <-published; err != nil {
			return runResult{}, err
		}
	}
	stopMeter()
	if err := <-meterErr; err != nil && !errors.Is(err, context.Canceled) {
		return runResult{}, fmt.Errorf("the meter: %w", err)
	}
	first := report.First
	if r == backlogRound {
		first = run.started
	}
	res := run.result(first)
	switch r {
	case backlogRound:
		progress("backlog round: %d events metered in %s from the meter's start to its last commit: %.0f events/s",
			w.Events, res.took.Round(time.Millisecond), res.rate)
		reportCPU(cpu, 0, w.Events, res.took)
		return res, nil
	case warmUpRound:
		progress("warm-up round: %d events metered at %.0f events/s (not counted)", w.Events, res.rate)
		return res, nil
	case pacedRound:
		progress("paced round: %d events published at %d events/s, metered in %s from the first publication to the last commit; publish to commit p50 %s, p99 %s, max %s",
			w.Events, w.Rate, res.took.Round(time.Millisecond), res.p50.Round(time.Millisecond), res.p99.Round(time.Millisecond),
			res.max.Round(time.Millisecond))
		reportCPU(cpu, report.CPU, w.Events, res.took)
		return res, nil
	}
	progress("meter: %d events of %d bytes in %s from the first publication to the last commit: %.0f events/s; publish to commit p50 %s, p99 %s, max %s",
		w.Events, report.Bytes/report.Published, res.took.Round(time.Millisecond), res.rate,
		res.p50.Round(time.Millisecond), res.p99.Round(time.Millisecond), res.max.Round(time.Millisecond))
	reportCPU(cpu, report.CPU, w.Events, res.took)
	return res, nil
}

// meterRun gathers what the meter reports of each committed batch.
type meterRun struct {
	mu        sync.Mutex
	want      int
	stored    int
	rejected  int
	latencies []time.Duration
	started   time.Time
	last      time.Time // the last commit
	finished  bool
	done      chan struct{} // closed when every event is metered
}

func newMeterRun(want int) *meterRun {
	return &meterRun{want: want, latencies: make([]time.Duration, 0, want), started: time.Now(), done: make(chan struct{})}
}

// committed is the meter's OnCommit.
func (r *meterRun) committed(res metering.BatchResult, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	for _, t := range res.Occurred {
		r.latencies = append(r.latencies, at.Sub(t))
	}
	r.stored += res.Stored
	if r.rejected == 0 && len(res.Rejections) > 0 {
		first := res.Rejections[0]
		progress("the meter rejects events of the workload, first %s: %s: %s", first.EventID, first.Reason, first.Detail)
	}
	r.rejected += len(res.Rejections)
	r.last = at
	if r.stored+r.rejected >= r.want {
		r.finished = true
		close(r.done)
	}
}

// progress is what has been metered so far, and for how long nothing has been committed.
func (r *meterRun) progress() (stored, rejected int, idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	since := r.started
	if r.last.After(since) {
		since = r.last
	}
	return r.stored, r.rejected, time.Since(since)
}

type runResult struct {
	took          time.Duration
	rate          float64
	p50, p99, max time.Duration
}

// result is the run's figures, timed from the publisher's first publication.
func (r *meterRun) result(first time.Time) runResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.latencies)
	at := func(q float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
	}
	took := r.last.Sub(first)
	return runResult{took: took, rate: float64(r.want) / took.Seconds(), p50: at(0.50), p99: at(0.99), max: at(1)}
}

// reportCPU says where the machine's CPU went from the first publication to the last commit.
func reportCPU(c cpuuse.Use, publisher time.Duration, events int, took time.Duration) {
	perEvent := func(d time.Duration) string {
		return fmt.Sprintf("%.1fs (%.0f µs/event)", d.Seconds(), float64(d.Microseconds())/float64(events))
	}
	if c.Total == 0 {
		progress("CPU: this process (meter and embedded NATS) %s, publisher %s", perEvent(c.Self), perEvent(publisher))
		return
	}
	progress("CPU: this process (meter and embedded NATS) %s, publisher %s, PostgreSQL %s, the rest of the machine %s; machine busy %.0f%% of %.0f cores for %s",
		perEvent(c.Self), perEvent(publisher), perEvent(c.Postgres), perEvent(max(0, c.Busy-c.Self-publisher-c.Postgres)),
		100*c.Busy.Seconds()/c.Total.Seconds(), c.Total.Seconds()/took.Seconds(), took.Round(time.Millisecond))
}
