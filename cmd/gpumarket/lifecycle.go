package main

import (
	"context"
	"fmt"
	"github.com/gpumarket/gpumarket/services/credits"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/events"
)

// How the platform's parts start and stop (docs/lifecycle.md). Open connects to PostgreSQL
// and NATS and builds the parts; Run starts them, each with the context it stops on, and when
// ctx ends or one of them fails, stops them in order and waits for each; Close then lets go of
// NATS and the database, last.

// shutdownGrace is how long the requests in flight may take to finish once the platform stops.
const shutdownGrace = 20 * time.Second

// drainWait bounds how long Close waits for a NATS connection's handlers to finish the
// messages they already have.
const drainWait = 5 * time.Second

// running is what Run started, for stop: the contexts the parts stop on, what waits for each
// group of them, and the first part that failed.
type running struct {
	ctx    context.Context // the background loops' and the meter's
	cancel context.CancelFunc
	// logCtx is the gateway's record's: it outlives ctx until the requests in flight have
	// finished, so that their attempts are written too.
	logCtx  context.Context
	stopLog context.CancelFunc
	failed  chan error // the first failure of a part; the others are dropped

	servers, meter, loops, requestLog sync.WaitGroup
}

func newRunning(ctx context.Context) *running {
	r := &running{failed: make(chan error, 1)}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.logCtx, r.stopLog = context.WithCancel(context.WithoutCancel(ctx))
	return r
}

// fail records that a part failed, unless another failed first; Run then stops them all.
func (r *running) fail(part string, err error) {
	select {
	case r.failed <- fmt.Errorf("%s: %w", part, err):
	default:
	}
}

// Run starts the parts and serves until ctx ends or one part fails: the HTTP server (or the
// /metrics one) stops serving, the meter's stream of messages closes, the rig limits' watcher
// cannot subscribe. Then it stops every part in order (stop) and returns: nil when ctx ended,
// else the failing part's error, which `gpumarket serve` exits non-zero with. Call Close after.
func (p *Platform) Run(ctx context.Context) (err error) {
	r := newRunning(ctx)
	defer func() { err = p.stop(r, err) }()
	if err := p.start(r); err != nil {
		return err
	}
	p.log.Info("serving", "url", p.URL(), "roles", p.cfg.Roles.String())
	select {
	case err := <-r.failed:
		return err
	case <-ctx.Done():
		return nil
	}
}

// start starts the parts: the gateway's routing table first (its first load must succeed), its
// record, reconciliation and batch scheduler; the rig limits' watcher; the meter; the usage
// partitions' and the automatic close's rounds; and the HTTP servers last, once what they serve
// runs.
func (p *Platform) start(r *running) error {
	p.startReliability(r)
	if p.router != nil {
		if err := p.router.Start(r.ctx); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		r.requestLog.Go(func() { p.requestLog.Run(r.logCtx) })
		r.loops.Go(func() { p.reconcile(r.ctx) })
		r.loops.Go(func() { p.gateway.RunProbes(r.ctx, p.probeAccount) })
		p.batchScheduler = p.newBatchScheduler()
		p.batchScheduler.Start(r.ctx)
	}
	if w := p.rigLimits.Load(); w != nil {
		r.loops.Go(func() {
			if err := w.Run(r.ctx); err != nil {
				r.fail("rig limits", err)
			}
		})
	}
	if p.alerts != nil {
		r.loops.Go(func() { p.alerts.Run(r.ctx, budgets.DefaultAlertEvery) })
	}
	if p.meter != nil {
		r.meter.Go(func() {
			if err := p.meter.Run(r.ctx); err != nil && r.ctx.Err() == nil {
				r.fail("meter", err)
			}
		})
		p.log.Info("metering usage events", "stream", events.UsageStream, "consumer", events.UsageConsumer)
		r.loops.Go(func() { p.fundProbes(r.ctx, probeFundingEvery) })
	}
	// Every process keeps the usage partitions; a lock lets one of them at a time.
	p.usageStore.Start(r.ctx)
	// Every web process runs auto top-up's worker; the settings' lock makes two of them charge once.
	if p.topups != nil {
		every := p.cfg.TopupEvery
		if every <= 0 {
			every = credits.DefaultTopupEvery // a Config built in code rather than read from the environment
		}
		r.loops.Go(func() { p.topups.Run(r.ctx, every, p.log.With("part", "auto top-up")) })
	}
	// Every process closes due periods by itself; the period's lock lets one of them at a time.
	r.loops.Go(func() { p.invoicing.RunAutoClose(r.ctx, autoCloseFirst, autoCloseEvery) })
	// Every process with the webhooks' key delivers due webhooks; a lease lets one of them take each.
	if p.webhooks.Delivers() {
		r.loops.Go(func() { p.webhooks.Run(r.ctx) })
	}
	if p.mailSender != nil {
		// Every web process sends; each message's lease lets one of them at a time.
		r.loops.Go(func() { p.mailSender.Run(r.ctx) })
	}
	if p.cfg.Roles.Web {
		// Every web process deletes the sent e-mail and the webhook log past their retention.
		r.loops.Go(func() { p.runHousekeeping(r.ctx, housekeepingFirst, housekeepingEvery) })
	}
	// A server that stops serving before stop shut it down (its listener gone, or closed by
	// another hand) is a failure; once stop has begun, a failure is no longer read.
	r.servers.Go(func() { r.fail("http", p.http.Serve(p.listener)) })
	if p.metricsHTTP != nil {
		r.servers.Go(func() { r.fail("metrics http", p.metricsHTTP.Serve(p.metricsListener)) })
		p.log.Info("serving /metrics on its own address", "url", p.MetricsURL())
	}
	return nil
}

// stop stops what start started, in order, each step waiting for the one before:
//
//  1. web and gateway: the batch scheduler stops claiming lines and records those in flight; the
//     HTTP servers stop accepting and finish the requests in flight (up to shutdownGrace, then
//     their connections are closed).
//  2. the meter stops consuming and commits the batch it holds; the routing table shares and
//     flushes its last figures; the other rounds end.
//  3. the gateway's record writes what is left; the gateway's and the pages' own work in the
//     background ends.
//
// NATS and the database stay for Close. It returns cause, or the HTTP server's failure to
// finish in time when there is no cause.
func (p *Platform) stop(r *running, cause error) error {
	if cause != nil {
		p.log.Error("a part failed; stopping the others", "err", cause)
	} else {
		p.log.Info("shutting down: finishing requests in flight")
	}
	if p.batchScheduler != nil {
		p.batchScheduler.Close()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if p.metricsHTTP != nil {
		if err := p.metricsHTTP.Shutdown(shutdownCtx); err != nil {
			_ = p.metricsHTTP.Close()
		}
	}
	if err := p.http.Shutdown(shutdownCtx); err != nil {
		_ = p.http.Close()
		if cause == nil {
			cause = fmt.Errorf("http: requests in flight did not finish within %s: %w", shutdownGrace, err)
		}
	}
	r.servers.Wait()
	p.stopped("web and gateway")

	r.cancel()
	r.meter.Wait()
	p.feed.Close()
	if p.meter != nil {
		p.stopped("meter")
	}
	if p.router != nil {
		p.router.Close()
	}
	p.usageStore.Close()
	r.loops.Wait()
	p.stopped("background rounds")

	r.stopLog()
	r.requestLog.Wait()
	if p.gateway != nil {
		p.gateway.Close()
	}
	p.web.Close()
	p.stopped("gateway's record")
	return cause
}

// stopped logs that a part has stopped; docs/lifecycle.md lists them in their order.
func (p *Platform) stopped(part string) { p.log.Info("stopped", "part", part) }

// Close lets go of what Open made, once Run has returned (or when it was never called): the
// listeners, stripe-mock, then NATS (the connections drained, the embedded server shut down)
// and the database last. Open calls it when it fails part way.
func (p *Platform) Close() {
	// A batch scheduler a test started in place of Run's.
	if p.batchScheduler != nil {
		p.batchScheduler.Close()
	}
	if p.usageStore != nil {
		p.usageStore.Close()
	}
	if p.listener != nil {
		_ = p.listener.Close()
	}
	if p.metricsListener != nil {
		_ = p.metricsListener.Close()
	}
	p.stripeMock.Stop()
	if p.mailCatcher != nil {
		p.mailCatcher.Close()
	}
	if p.rigLimitsNC != nil {
		p.rigLimitsNC.Close()
	}
	if p.rigCaller != nil {
		p.rigCaller.Close()
	}
	if p.rigNC != nil {
		p.rigNC.Close()
	}
	p.closeRigEntry()
	if p.nc != nil {
		drain(p.nc)
	}
	if p.natsServer != nil {
		p.natsServer.Shutdown()
		p.natsServer.WaitForShutdown()
	}
	if p.nc != nil || p.natsServer != nil {
		p.stopped("nats")
	}
	if p.pool != nil {
		p.pool.Close()
		p.stopped("database")
	}
}

// drain lets nc's subscriptions finish the messages they have, then closes it and waits until
// it is closed (nats.Conn.Drain returns at once).
func drain(nc *nats.Conn) {
	if err := nc.Drain(); err != nil {
		nc.Close() // already closed, or not connected: nothing to drain
		return
	}
	for deadline := time.Now().Add(drainWait); !nc.IsClosed() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	nc.Close()
}
