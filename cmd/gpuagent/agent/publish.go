package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"
)

const (
	// publishWindow is how many events are published before their acknowledgements are awaited.
	publishWindow = 256
	// ackTimeout bounds the wait for one acknowledgement.
	ackTimeout = 5 * time.Second
	// Retry backoff of the sender, doubling from min to max.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
	// rescanEvery is how often an idle sender looks at the outbox anyway.
	rescanEvery = 30 * time.Second
	// reconnectWait is the pause between attempts to reach a lost server; nats.go adds jitter.
	reconnectWait = time.Second
	// publishLinger is how long the sender, woken by a new event, waits for more before it publishes, unless a
	// window's worth is waiting. One round of publishing (the outbox's listing, the publishes, the wait for their
	// acknowledgements, the removals) then serves every request of the last publishLinger instead of each request
	// its own, and runs apart from the responses rather than beside each one while it is on its way to the client.
	// Every event is in the outbox, on disk, throughout: the wait delays its metering and risks nothing.
	publishLinger = 20 * time.Millisecond
	// maxPublishRate is the most usage events a second the agent publishes, in bursts of a window: half the
	// platform's default limit per rig (riglimits.DefaultMaxRate), so that an outbox emptied after an outage
	// never gets the rig shut out. A rig serving faster than this keeps the excess in its outbox.
	maxPublishRate = 1000
)

var errNotConnected = errors.New("not connected to NATS")

// connect starts connecting with the rig's credentials. It does not wait for the server: the connection keeps
// trying for ever, and wakes the sender whenever it is up again.
func (a *Agent) connect() (*nats.Conn, jetstream.JetStream, error) {
	log := a.log
	opts := []nats.Option{
		nats.Name("gpuagent/" + a.cfg.ProviderID + "/" + a.cfg.OfferingID),
		nats.CustomInboxPrefix(events.RigInboxPrefix(a.cfg.ProviderID, a.cfg.OfferingID)),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		// A refused credential may be fixed on the server side while the agent runs: keep trying.
		nats.IgnoreAuthErrorAbort(),
		nats.ConnectHandler(func(nc *nats.Conn) {
			a.refusedCredential.Store(false)
			log.Info("connected to NATS", "server", nc.ConnectedUrlRedacted())
			a.notify()
			a.askBeat()
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			a.refusedCredential.Store(false)
			log.Info("NATS connection restored", "server", nc.ConnectedUrlRedacted())
			a.notify()
			a.askBeat()
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost; usage events wait in the outbox", "error", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrAuthorization) {
				a.credentialRefused(err)
				return
			}
			log.Error("NATS error", "error", err)
		}),
	}
	if a.cfg.NATSUser != "" {
		opts = append(opts, nats.UserInfo(a.cfg.NATSUser, a.cfg.NATSPassword))
	}
	nc, err := nats.Connect(a.cfg.NATSURL, opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// credentialRefused says, once until the next connection, that the server refused the rig's credential. The
// connection keeps trying: the platform's embedded server refuses a rig for a cooldown while it has published
// usage events faster than the platform allows (docs/usage-stream.md), and a wrong credential may be fixed.
func (a *Agent) credentialRefused(err error) {
	if a.refusedCredential.Swap(true) {
		return
	}
	a.log.Warn("NATS refuses this rig's credential; usage events wait in the outbox. The platform refuses a rig "+
		"for a while after it published usage events faster than its limit; otherwise check the credential",
		"subject", a.subject, "user", a.cfg.NATSUser, "error", err)
}

// logRefusal says why the usage stream refused this rig's events, naming the rig's subject.
func (a *Agent) logRefusal(r *usage.RefusedError) {
	a.log.Warn("the usage stream refuses this rig's events; they stay in the outbox and are sent again",
		"subject", r.Subject, "reason", r.Reason, "outbox", a.outbox.pending.Load(), "error", r)
}

// sendLoop sends the outbox whenever an event is added or the connection comes back, and retries failures
// with backoff, until ctx ends.
func (a *Agent) sendLoop(ctx context.Context) {
	backoff := minBackoff
	failing := false
	var lastReason usage.RefusalReason // of the last failure, when the stream refused
	for {
		err := a.flush(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := rescanEvery
		switch {
		case err != nil:
			// Said once per run of failures, and again when the stream's refusal changes.
			var refused *usage.RefusedError
			var reason usage.RefusalReason
			if errors.As(err, &refused) {
				reason = refused.Reason
			}
			switch {
			case failing && reason == lastReason:
			case refused != nil:
				a.logRefusal(refused)
			default:
				a.log.Warn("usage events not acknowledged; retrying", "outbox", a.outbox.pending.Load(), "error", err)
			}
			lastReason = reason
			failing, wait, backoff = true, backoff, min(2*backoff, maxBackoff)
		case failing:
			a.log.Info("usage events acknowledged; the outbox is empty")
			failing, backoff, lastReason = false, minBackoff, ""
		}
		// A new event or a restored connection sends at once, unless the stream is refusing this rig: then only
		// the meter's catching up helps, and trying sooner would only be refused again.
		wake := a.wake
		if lastReason != "" {
			wake = nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-wake:
			if !failing {
				a.linger(ctx)
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// linger waits publishLinger for more events to join the one that woke the sender, unless a window's worth is
// waiting already or ctx ends.
func (a *Agent) linger(ctx context.Context) {
	if a.outbox.pending.Load() >= publishWindow {
		return
	}
	t := time.NewTimer(publishLinger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// flush publishes the outbox, oldest first, in windows of publishWindow events, and removes each event the
// stream acknowledges (a duplicate's acknowledgement too: the stream had it already). It stops at the first
// window with a failure.
func (a *Agent) flush(ctx context.Context) error {
	entries, err := a.outbox.list()
	if err != nil {
		return err
	}
	if len(entries) > 0 && !a.nc.IsConnected() {
		return errNotConnected
	}
	if len(entries) > 0 {
		a.rounds.Add(1)
	}
	for len(entries) > 0 {
		window := entries[:min(len(entries), publishWindow)]
		entries = entries[len(window):]
		futures := make([]jetstream.PubAckFuture, 0, len(window))
		var failed error
		for _, e := range window {
			body, err := a.outbox.read(e)
			if err != nil {
				failed = err
				break
			}
			if err := a.pace.Wait(ctx); err != nil {
				failed = err
				break
			}
			msg := nats.NewMsg(a.subject)
			msg.Data = body
			f, err := a.js.PublishMsgAsync(msg, jetstream.WithMsgID(e.id), jetstream.WithExpectStream(events.UsageStream))
			if err != nil {
				failed = err
				break
			}
			futures = append(futures, f)
		}
		for i, f := range futures {
			select {
			case <-f.Ok():
				if err := a.outbox.remove(window[i]); err != nil {
					failed = err
				}
				a.acked.Add(1)
			case err := <-f.Err():
				if failed == nil {
					failed = err
					if r := usage.Refused(a.subject, err); r != nil {
						failed = r
					}
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if failed != nil {
			return failed
		}
	}
	return nil
}

// Heartbeat is what a rig publishes every HeartbeatInterval on heartbeat.<provider_id>.<offering_id>
// (events.HeartbeatSubject), for the gateway to route on.
type Heartbeat struct {
	OfferingID string `json:"offering_id"`
	ProviderID string `json:"provider_id"`
	InFlight   int    `json:"in_flight"` // requests being served
	Queued     int    `json:"queued"`    // requests waiting: always 0, the agent queues nothing itself
	Capacity   int    `json:"capacity"`  // requests the rig serves at once (Config.Capacity)
	// Native are the APIs besides chat completions that the upstream was found to serve itself (NativeMessages,
	// NativeResponses), sorted: the gateway passes a request in one of them through to this rig as it came,
	// instead of translating it into a chat completion. None until the agent has probed its upstream.
	Native []string  `json:"native,omitempty"`
	At     time.Time `json:"at"`
}

// heartbeatLoop publishes a heartbeat at once and then every HeartbeatInterval until ctx ends, and one more
// whenever the connection comes up (none is sent while it is down: a heartbeat is worth nothing late) or a
// gateway asks on events.HeartbeatRequestSubject: at once, or, within events.HeartbeatRequestGap of the last
// one sent so, when that gap has passed, one for every request that came meanwhile.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	sub, err := a.nc.Subscribe(events.HeartbeatRequestSubject, func(*nats.Msg) { a.askBeat() })
	if err != nil {
		a.log.Warn("heartbeat requests not received: gateways learn of this rig at its next heartbeat", "error", err)
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	var lastAsked time.Time       // when the last heartbeat asked for went out
	var deferred <-chan time.Time // a heartbeat asked for, waiting for the gap to pass
	a.beat()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.beat()
		case <-a.beatAsked:
			if deferred != nil {
				continue // the heartbeat on its way answers this request too
			}
			if wait := events.HeartbeatRequestGap - time.Since(lastAsked); wait > 0 {
				deferred = time.After(wait)
				continue
			}
			a.beat()
			lastAsked = time.Now()
		case <-deferred:
			deferred = nil
			a.beat()
			lastAsked = time.Now()
		}
	}
}

// askBeat asks the heartbeat loop for a heartbeat now, without waiting.
func (a *Agent) askBeat() {
	select {
	case a.beatAsked <- struct{}{}:
	default:
	}
}

// beat publishes one heartbeat, if the connection is up.
func (a *Agent) beat() {
	if !a.nc.IsConnected() {
		return
	}
	b, _ := json.Marshal(Heartbeat{
		OfferingID: a.cfg.OfferingID,
		ProviderID: a.cfg.ProviderID,
		InFlight:   a.meter.inFlightNow(),
		Capacity:   a.cfg.Capacity,
		Native:     a.nativeNow().names(),
		At:         a.cfg.Now().UTC(),
	})
	if err := a.nc.Publish(a.heartbeat, b); err != nil {
		a.log.Debug("heartbeat not sent", "error", err)
	}
}
