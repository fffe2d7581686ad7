//go:build linux

// Linux only: the meter child process is tied to this test process with Pdeathsig, so that a
// test run killed by a timeout never leaves a meter behind.

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/fixtures"
	usageevent "github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The reliability test (docs/failure-cases.md, cases 1-8) runs `gpumarket meter` as its own
// process, as production does, and breaks what is around it while 20,000 usage events go
// through: 18,000 distinct valid events, 1,000 re-sent at once (the stream's window drops
// them), 1,000 re-sent after the window has passed (the database must refuse them), and 300
// events the meter must refuse with a reason. Meanwhile the meter is killed with SIGKILL three
// times part-way through its work, the NATS server is restarted once on the same port and
// store, and every PostgreSQL connection to the database is terminated once. The gateway's
// record of each valid event's request is written as the gateway writes it, before the event
// is published. Then exactly the distinct valid events are stored, each priced as the test
// prices it (the price version and asks of its ticket), the ledger balances to the picodollar,
// and every refused event is counted once against its rig with its reason, the first of each
// rig and reason kept whole.
const (
	reliabilityDistinct  = 18_000
	reliabilityDupWindow = 2 * time.Second // the stream's deduplication window, shortened
	reliabilityAckWait   = 3 * time.Second // how soon a killed meter's events come back
	reliabilityTicketKey = "reliability-test-ticket-key-0123456789"
)

// reliabilityWaves splits the distinct events into the waves the faults are timed against.
var reliabilityWaves = [...]int{5_000, 4_000, 4_000, 3_000, 2_000}

func TestMeterReliability(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the meter as a process through crashes and restarts (about 20 seconds)")
	}
	r := setupReliability(t)
	valid := r.validEvents(reliabilityDistinct)
	bad := r.badEvents(300)
	waves := make([][]*sentEvent, len(reliabilityWaves))
	for i, lo := 0, 0; i < len(waves); i++ {
		waves[i], lo = valid[lo:lo+reliabilityWaves[i]], lo+reliabilityWaves[i]
	}
	badOf := func(w int) []*badEvent { return bad[w*len(bad)/len(waves) : (w+1)*len(bad)/len(waves)] }

	r.startMeter()
	r.checkStreamSettings()

	// Wave 1 with the meter running; it is killed part-way, and the rest of the wave waits.
	var want int
	done := r.beside(func() error {
		n, err := r.whenPartway(0, want+len(waves[0]), r.killMeter)
		r.logf("SIGKILL 1 with %d events stored", n)
		return err
	})
	r.publishWave(waves[0], badOf(0), nil)
	r.join(done)
	want += len(waves[0])

	// Wave 2 while no meter runs; a new meter starts on the backlog and is killed part-way.
	r.publishWave(waves[1], badOf(1), nil)
	want += len(waves[1])
	before := r.stored()
	r.spawnMeter() // not waiting until it is ready: it may be through the backlog by then
	n, err := r.whenPartway(before, want, r.killMeter)
	r.logf("SIGKILL 2 with %d events stored (%d before the restart)", n, before)
	if err != nil {
		t.Fatal(err)
	}
	r.startMeter()

	// Wave 3: the NATS server is restarted while the meter works through it.
	before = r.stored()
	done = r.beside(func() error {
		n, err := r.whenPartway(before, want+len(waves[2]), r.restartNATS)
		r.logf("NATS restarted with %d events stored", n)
		return err
	})
	r.publishWave(waves[2], badOf(2), nil)
	r.join(done)
	want += len(waves[2])
	r.waitStored(want, "the meter did not resume after the NATS restart")

	// Wave 4: PostgreSQL terminates every connection while the meter writes; the wave also
	// re-sends wave 1's events, long after the stream's window has forgotten them.
	before = r.stored()
	done = r.beside(func() error {
		n, err := r.whenPartway(before, want+len(waves[3]), r.terminatePostgres)
		r.logf("PostgreSQL connections terminated with %d events stored", n)
		return err
	})
	r.publishWave(waves[3], badOf(3), r.lateResends(waves[0]))
	r.join(done)
	want += len(waves[3])

	// Wave 5 with the third SIGKILL, and the late re-sends of wave 2.
	before = r.stored()
	done = r.beside(func() error {
		n, err := r.whenPartway(before, want+len(waves[4]), r.killMeter)
		r.logf("SIGKILL 3 with %d events stored", n)
		return err
	})
	r.publishWave(waves[4], badOf(4), r.lateResends(waves[1]))
	r.join(done)
	r.startMeter()

	r.waitDrained()
	r.logf("drained: %d meter starts", r.starts)
	r.checkUsage(valid)
	r.checkLedger(valid)
	r.checkRejections(valid, bad)
	r.summariseMeterLog()
}

// reliability is the world the test breaks: a database, an embedded NATS server it restarts on
// the same port and store, the meter binary and its running process, and the accounts,
// offerings and prices the events are billed against.
type reliability struct {
	t        *testing.T
	begin    time.Time
	pool     *pgxpool.Pool
	dbURL    string
	bin      string
	dataDir  string
	storeDir string
	natsPort int
	srv      *server.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	quiet    *slog.Logger
	httpAddr string
	logPath  string
	meter    *meterProcess
	starts   int
	signer   *ticket.Signer
	rng      *rand.Rand

	// pubMu is held for reading by each publish and for writing across the NATS restart, so
	// that no publish is left in doubt (stored or not) by the restart.
	pubMu sync.RWMutex

	customers []string
	apiKeys   []string // the customers', index for index
	providers []string
	offerings []reliabilityOffering  // the first two are providers[0]'s, the third providers[1]'s
	prices    map[string][2]int64    // tier: input and output micro-dollars per million tokens
	priceIDs  map[string]int64       // tier: the version of its price in force today
	requests  *requestlog.RequestLog // the gateway's record of each valid event's request

	inWindow []resend // re-sent at once, inside the stream's window
	late     []resend // re-sent after the window
}

type reliabilityOffering struct {
	id, provider  string
	askIn, askOut int64 // micro-dollars per million input and output tokens
}

// sentEvent is a valid event as the test built it, with what it must cost.
type sentEvent struct {
	index    int
	ev       usageevent.UsageEvent
	subject  string
	body     []byte
	customer string
	provider string
	charge   int64  // picodollars
	payable  int64  // picodollars
	seq      uint64 // stream sequence of its first publish
	sentAt   time.Time
}

// resend is a second publish of a valid event's id, with what the stream made of it.
type resend struct {
	ev        *sentEvent
	seq       uint64
	duplicate bool // the stream dropped it as a duplicate
}

// badEvent is an event the meter must refuse, with the reason and event id it must record.
type badEvent struct {
	subject string
	eventID string
	body    []byte
	reason  usageevent.RejectReason
	seq     uint64
}

// meterProcess is one run of `gpumarket meter`.
type meterProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	killed bool
}

func setupReliability(t *testing.T) *reliability {
	t.Helper()
	ctx := context.Background()
	r := &reliability{t: t, begin: time.Now(), dataDir: t.TempDir(), storeDir: t.TempDir(),
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil)), rng: rand.New(rand.NewPCG(4, 10))}
	r.pool, r.dbURL = dbtest.NewWithURL(t)
	r.logPath = filepath.Join(r.dataDir, "meter.log")
	r.bin = buildGPUMarket(t, r.dataDir)
	r.logf("built the binary")

	var err error
	if r.srv, err = natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: r.storeDir, Log: r.quiet}); err != nil {
		t.Fatal(err)
	}
	r.natsPort = r.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { r.srv.Shutdown(); r.srv.WaitForShutdown() })
	if r.nc, r.js, err = events.Connect(ctx, r.srv.ClientURL(), "reliability-test", r.quiet); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	// Created before the meter starts, with the short window and ack wait; the meter process
	// must keep them (it is given the same settings).
	if _, err := usageevent.EnsureStreams(ctx, r.js, usageevent.StreamOptions{
		DuplicateWindow: reliabilityDupWindow, AckWait: reliabilityAckWait}); err != nil {
		t.Fatal(err)
	}
	// Oversized (docs/failure-cases.md, case 7): the stream itself refuses an event over
	// MaxEventBytes, so it never reaches the meter.
	if _, err := r.publish(events.UsageSubject("p", "o"), "", bytes.Repeat([]byte("x"), usageevent.MaxEventBytes+1)); err == nil {
		t.Error("the stream accepted an event over MaxEventBytes")
	}

	r.httpAddr = freeAddr(t)
	t.Cleanup(func() {
		if r.meter != nil {
			r.meter.kill()
		}
		if t.Failed() {
			r.dumpMeterLog()
		}
	})

	r.signer, err = ticket.NewSigner([]byte(reliabilityTicketKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Acme", "Globex"} {
		customer := fixtures.Account(t, r.pool, name)
		user := fixtures.User(t, r.pool, customer, strings.ToLower(name)+"@reliability.test", "developer")
		r.customers = append(r.customers, customer)
		hash := sha256.Sum256([]byte(name))
		r.apiKeys = append(r.apiKeys, fixtures.APIKey(t, r.pool, customer, user, "reliability",
			fixtures.KeyPrefix("gm_rel"), fixtures.KeyHash(hash[:])))
	}
	for _, name := range []string{"Fjord Compute", "Sogn GPU"} {
		r.providers = append(r.providers, fixtures.Account(t, r.pool, name))
	}
	for _, o := range []struct {
		provider      string
		askIn, askOut int64
	}{{r.providers[0], 100_000, 200_000}, {r.providers[0], 130_000, 260_000}, {r.providers[1], 90_000, 180_000}} {
		id := fixtures.Offering(t, r.pool, o.provider, fixtures.WithModel("llama-3.1-8b"), fixtures.WithAsk(o.askIn, o.askOut))
		r.offerings = append(r.offerings, reliabilityOffering{id: id, provider: o.provider, askIn: o.askIn, askOut: o.askOut})
	}
	// The prices in force; tomorrow's change must not apply to today's events, whose tickets
	// name today's price versions.
	r.prices = map[string][2]int64{"standard": {150_000, 300_000}, "realtime": {400_000, 800_000}}
	r.priceIDs = map[string]int64{}
	for tier, p := range r.prices {
		for _, at := range []struct {
			from   time.Time
			factor int64
		}{{time.Now().AddDate(0, -1, 0), 1}, {time.Now().AddDate(0, 0, 1), 3}} {
			id := fixtures.Price(t, r.pool, tier, at.from, p[0]*at.factor, p[1]*at.factor)
			if at.factor == 1 {
				r.priceIDs[tier] = id
			}
		}
	}
	r.requests = requestlog.NewRequestLog(r.pool, nil, nil, r.quiet)
	return r
}

// buildGPUMarket builds this command once, as `go build` does for production.
func buildGPUMarket(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the meter: %v", err)
	}
	bin := filepath.Join(dir, "gpumarket")
	out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddr is a loopback address free now, for a process the test starts to listen on. Its port
// is below the kernel's range of ephemeral ports (32768 and up on Linux): a port the kernel
// handed out for a listener on :0 is free again once the listener closes, and may be taken as
// the source port of any outgoing connection (a process's own NATS or PostgreSQL connections)
// before the process binds it, while one below that range is never handed out by the kernel.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		port := 10000 + rand.IntN(22000) // 10000-31999
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use: another
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no free port between 10000 and 31999 on 127.0.0.1 after 200 tries")
	return ""
}

func (r *reliability) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("%6.1fs  %s", time.Since(r.begin).Seconds(), fmt.Sprintf(format, args...))
}

// validEvents builds n signed, valid events for the two customers across the three
// offerings and two tiers, with token counts up to the contract's bounds so that the sums pass
// 2^53 (a float would no longer be exact). One in twenty produced no completion token.
func (r *reliability) validEvents(n int) []*sentEvent {
	base := time.Now().Add(-2 * time.Minute).UTC()
	out := make([]*sentEvent, n)
	for i := range out {
		off := r.offerings[r.rng.IntN(len(r.offerings))]
		tier := []string{"standard", "realtime"}[r.rng.IntN(2)]
		in, outTok := r.rng.Int64N(usageevent.MaxTokens+1), r.rng.Int64N(2_000_001)
		if i%20 == 7 {
			outTok = 0
		}
		c := i % len(r.customers)
		e := &sentEvent{index: i, customer: r.customers[c], provider: off.provider,
			subject: events.UsageSubject(off.provider, off.id)}
		at := base.Add(time.Duration(i) * time.Millisecond)
		e.ev = r.event(r.signer, fmt.Sprintf("evt-%05d", i), fmt.Sprintf("req-%05d", i), e.customer, off.provider,
			off.id, off.id, tier, at, in, outTok)
		e.body = r.encode(e.ev)
		if outTok > 0 {
			p := r.prices[tier]
			e.charge = in*p[0] + outTok*p[1]
			e.payable = in*off.askIn + outTok*off.askOut
		}
		// What the gateway saw: a 200 streamed whole, four bytes of text per output token.
		r.requests.Record(requestlog.GatewayRequest{RequestID: e.ev.Data.RequestID, AccountID: e.customer, APIKeyID: r.apiKeys[c],
			OfferingID: off.id, Tier: catalog.Tier(tier), Model: "llama-3.1-8b", HTTPStatus: 200, Status: requestlog.GatewayOK,
			Duration: 1500 * time.Millisecond, At: at, InputBytes: 4 * in, MaxInputTokens: in, MaxOutputTokens: outTok,
			Streamed: true, RelayedOutputBytes: 4 * outTok, RelayedOutputChunks: outTok})
		out[i] = e
	}
	if err := r.requests.Flush(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// event builds a usage event of the offering, reported by provider, whose ticket is signed by
// signer for ticketOffering with the terms agreed at routing (the offering's asks, today's
// price version of the tier) and bounds that are the tokens the event reports.
func (r *reliability) event(signer *ticket.Signer, id, requestID, customer, provider, offering, ticketOffering, tier string,
	at time.Time, in, out int64) usageevent.UsageEvent {
	r.t.Helper()
	claims := ticket.Claims{RequestID: requestID, AccountID: customer, APIKeyID: r.apiKeys[0],
		OfferingID: ticketOffering, Tier: tier, PriceID: r.priceIDs[tier], MaxInputTokens: in, MaxOutputTokens: out,
		IssuedAt: at.Add(-2 * time.Second)}
	for i, c := range r.customers {
		if c == customer {
			claims.APIKeyID = r.apiKeys[i]
		}
	}
	for _, o := range r.offerings {
		if o.id == ticketOffering {
			claims.AskInput, claims.AskOutput = o.askIn, o.askOut
		}
	}
	tk, err := signer.Sign(claims)
	if err != nil {
		r.t.Fatal(err)
	}
	return usageevent.NewEvent(id, provider, offering, at, usageevent.Usage{RequestID: requestID, Ticket: tk,
		OfferingID: offering, Model: "llama-3.1-8b", InputTokens: in, OutputTokens: out, TTFTMillis: 120,
		DurationMillis: 1500, EnergyJoules: 40.5, EnergySource: usageevent.EnergyEstimated, Status: usageevent.StatusOK})
}

func (r *reliability) encode(ev usageevent.UsageEvent) []byte {
	r.t.Helper()
	b, err := usageevent.Encode(ev)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// changed is the event under the same id with other tokens and time: the meter must keep the
// first it stored (docs/failure-cases.md, case 3).
func (r *reliability) changed(e *sentEvent) []byte {
	ev := e.ev
	ev.Time = ev.Time.Add(time.Second)
	ev.Data.InputTokens = ev.Data.InputTokens/2 + 1
	ev.Data.OutputTokens++
	return r.encode(ev)
}

// badEvents builds n events the meter must refuse, ten kinds in turn (docs/failure-cases.md,
// case 7).
func (r *reliability) badEvents(n int) []*badEvent {
	forger, err := ticket.NewSigner([]byte(strings.Repeat("f", 32)))
	if err != nil {
		r.t.Fatal(err)
	}
	now := time.Now().Add(-time.Minute).UTC()
	own, sibling, foreign := r.offerings[0], r.offerings[1], r.offerings[2]
	prov, customer := own.provider, r.customers[0]
	out := make([]*badEvent, n)
	for i := range out {
		id, req := fmt.Sprintf("bad-%04d", i), fmt.Sprintf("badreq-%04d", i)
		ev := func(signer *ticket.Signer, offering, ticketOffering string, at time.Time) []byte {
			return r.encode(r.event(signer, id, req, customer, prov, offering, ticketOffering, "standard", at, 1000, 1000))
		}
		b := &badEvent{subject: events.UsageSubject(prov, own.id), eventID: id}
		switch i % 10 {
		case 0:
			b.body, b.reason, b.eventID = []byte(`{"specversion":"1.0","id":"`+id+`","data":{`), usageevent.RejectMalformed, ""
		case 1:
			b.body = bytes.Replace(ev(r.signer, own.id, own.id, now), []byte(usageevent.EventType), []byte("gpumarket.usage.v9"), 1)
			b.reason, b.eventID = usageevent.RejectSchema, ""
		case 2: // unsigned: the ticket's signature no longer matches
			b.body = bytes.Replace(ev(r.signer, own.id, own.id, now), []byte(`"ticket":"`), []byte(`"ticket":"x`), 1)
			b.reason = usageevent.RejectTicketInvalid
		case 3: // signed with another key
			b.body, b.reason = ev(forger, own.id, own.id, now), usageevent.RejectTicketInvalid
		case 4: // a genuine ticket for the provider's other offering
			b.body, b.reason = ev(r.signer, own.id, sibling.id, now), usageevent.RejectTicketOffering
		case 5: // foreign: the provider reports usage of another provider's offering
			b.subject = events.UsageSubject(prov, foreign.id)
			b.body, b.reason = ev(r.signer, foreign.id, foreign.id, now), metering.RejectForeign
		case 6:
			unknown := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			b.subject = events.UsageSubject(prov, unknown)
			b.body, b.reason = ev(r.signer, unknown, unknown, now), metering.RejectUnknownOffering
		case 7: // published on the subject of another offering
			b.subject = events.UsageSubject(prov, sibling.id)
			b.body, b.reason = ev(r.signer, own.id, own.id, now), usageevent.RejectSubjectMismatch
		case 8:
			b.body, b.reason = ev(r.signer, own.id, own.id, now.Add(-8*24*time.Hour)), usageevent.RejectStale
		case 9:
			b.body, b.reason = ev(r.signer, own.id, own.id, now.Add(time.Hour)), usageevent.RejectFuture
		}
		out[i] = b
	}
	return out
}

func (r *reliability) publish(subject, msgID string, body []byte) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = body
	if msgID != "" {
		msg.Header.Set(usageevent.HeaderMsgID, msgID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.js.PublishMsg(ctx, msg)
}

// publishWave publishes events in order, every eighteenth re-sent at once (half the re-sends
// changed), with the refused and late events spread among them. A publish that fails is
// fatal rather than retried: a retry could store an event twice and blur what is counted.
func (r *reliability) publishWave(evs []*sentEvent, bad []*badEvent, late []*sentEvent) {
	r.t.Helper()
	var nb, nl int
	for i, e := range evs {
		r.publishOriginal(e)
		for ; nb < len(bad) && nb*len(evs) <= i*len(bad); nb++ {
			ack := r.mustPublish(bad[nb].subject, "", bad[nb].body)
			bad[nb].seq = ack.Sequence
		}
		for ; nl < len(late) && nl*len(evs) <= i*len(late); nl++ {
			r.late = append(r.late, r.resend(late[nl], nl%2 == 1))
		}
	}
	for ; nb < len(bad); nb++ {
		bad[nb].seq = r.mustPublish(bad[nb].subject, "", bad[nb].body).Sequence
	}
	for ; nl < len(late); nl++ {
		r.late = append(r.late, r.resend(late[nl], nl%2 == 1))
	}
	r.logf("published %d events, %d refusable, %d late re-sends", len(evs), len(bad), len(late))
}

// publishOriginal publishes an event, and its in-window re-send under the same read lock so
// that the NATS restart never falls between the two.
func (r *reliability) publishOriginal(e *sentEvent) {
	r.t.Helper()
	r.pubMu.RLock()
	defer r.pubMu.RUnlock()
	e.seq, e.sentAt = r.mustPublish(e.subject, e.ev.ID, e.body).Sequence, time.Now()
	if e.index%18 == 0 {
		body := e.body
		if e.index%36 == 0 {
			body = r.changed(e)
		}
		ack := r.mustPublish(e.subject, e.ev.ID, body)
		r.inWindow = append(r.inWindow, resend{ev: e, seq: ack.Sequence, duplicate: ack.Duplicate})
	}
}

func (r *reliability) resend(e *sentEvent, change bool) resend {
	r.t.Helper()
	body := e.body
	if change {
		body = r.changed(e)
	}
	ack := r.mustPublish(e.subject, e.ev.ID, body)
	return resend{ev: e, seq: ack.Sequence, duplicate: ack.Duplicate}
}

func (r *reliability) mustPublish(subject, msgID string, body []byte) *jetstream.PubAck {
	r.t.Helper()
	ack, err := r.publish(subject, msgID, body)
	if err != nil {
		r.t.Fatalf("publish to %s: %v", subject, err)
	}
	return ack
}

// lateResends picks 500 of the wave's events that the meter has stored, to re-send after the
// stream's window (docs/failure-cases.md, case 5), waiting out the window (twice, since the
// stream forgets ids on a timer) if it has not yet passed.
func (r *reliability) lateResends(wave []*sentEvent) []*sentEvent {
	r.t.Helper()
	const n = 500
	ids := make([]string, len(wave))
	byID := map[string]*sentEvent{}
	for i, e := range wave {
		ids[i], byID[e.ev.ID] = e.ev.ID, e
	}
	var stored []string
	r.waitFor(20*time.Second, "the meter to store the events to re-send", func() bool {
		rows, err := r.pool.Query(context.Background(), `SELECT event_id FROM usage_events WHERE event_id = ANY ($1) ORDER BY event_id`, ids)
		if err != nil {
			return false
		}
		stored, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err == nil && len(stored) >= n
	})
	picked := make([]*sentEvent, n)
	var last time.Time
	for i := range picked {
		picked[i] = byID[stored[i*len(stored)/n]]
		if picked[i].sentAt.After(last) {
			last = picked[i].sentAt
		}
	}
	time.Sleep(time.Until(last.Add(2*reliabilityDupWindow + 200*time.Millisecond)))
	return picked
}

// beside runs f beside the publisher and returns where its result will arrive.
func (r *reliability) beside(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

func (r *reliability) join(done <-chan error) {
	r.t.Helper()
	if err := <-done; err != nil {
		r.t.Fatal(err)
	}
}

// whenPartway waits until the meter has stored more than from events and fewer than to, then
// does act: a fault that hits the meter with work delivered and not yet committed or
// acknowledged. It returns the count it saw.
func (r *reliability) whenPartway(from, to int, act func() error) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := r.stored()
		switch {
		case n > from && n < to:
			return n, act()
		case n >= to:
			return n, fmt.Errorf("the meter stored %d events before the fault could hit it between %d and %d", n, from, to)
		case r.meter != nil && r.meter.gone():
			return n, errors.New("the meter exited on its own")
		case time.Now().After(deadline):
			return n, fmt.Errorf("the meter made no progress past %d events in 30s", from)
		}
		time.Sleep(time.Millisecond)
	}
}

// stored counts the usage rows. The test's pool loses its connections when PostgreSQL's are
// terminated, so a failed count is tried again on another connection; -1 when the database
// cannot answer at all.
func (r *reliability) stored() int {
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var n int
		err := r.pool.QueryRow(ctx, `SELECT count(*) FROM usage_events`).Scan(&n)
		cancel()
		if err == nil {
			return n
		}
	}
	return -1
}

func (r *reliability) waitStored(want int, failure string) {
	r.t.Helper()
	r.waitFor(60*time.Second, failure, func() bool { return r.stored() >= want })
}

func (r *reliability) waitFor(timeout time.Duration, failure string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if r.meter != nil && r.meter.gone() {
			r.t.Fatalf("%s: the meter exited on its own", failure)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s (within %s)", failure, timeout)
		}
	}
}

// startMeter starts `gpumarket meter` and waits until it is ready.
func (r *reliability) startMeter() {
	r.t.Helper()
	r.spawnMeter()
	client := &http.Client{Timeout: time.Second}
	r.waitFor(30*time.Second, "the meter did not become ready", func() bool {
		res, err := client.Get("http://" + r.httpAddr + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	r.logf("meter start %d ready (pid %d)", r.starts, r.meter.cmd.Process.Pid)
}

// spawnMeter starts `gpumarket meter` with its log appended to meter.log.
func (r *reliability) spawnMeter() {
	r.t.Helper()
	r.starts++
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== meter start %d at %.1fs ===\n", r.starts, time.Since(r.begin).Seconds())
	cmd := exec.Command(r.bin, "meter")
	cmd.Env = append(environWithout("GPUMARKET_", "DATABASE_URL=", "NATS_URL=", "STRIPE_"),
		"DATABASE_URL="+r.dbURL,
		"NATS_URL=nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(r.natsPort)),
		"GPUMARKET_TICKET_KEY="+reliabilityTicketKey,
		"GPUMARKET_ADDR="+r.httpAddr,
		"GPUMARKET_DATA_DIR="+r.dataDir,
		"GPUMARKET_STREAM_DUPLICATE_WINDOW="+reliabilityDupWindow.String(),
		"GPUMARKET_STREAM_ACK_WAIT="+reliabilityAckWait.String(),
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	m := &meterProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	r.meter = m
}

func (r *reliability) killMeter() error {
	r.meter.kill()
	return nil
}

// kill sends SIGKILL, the crash that gives the process no chance to finish anything, and
// waits until it is gone.
func (m *meterProcess) kill() {
	m.killed = true
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

// gone is true when the process exited without being killed by the test.
func (m *meterProcess) gone() bool {
	select {
	case <-m.exited:
		return !m.killed
	default:
		return false
	}
}

// restartNATS shuts the server down and starts it again on the same port and store, then
// waits until the test's own connection is back (the meter's reconnects by itself).
func (r *reliability) restartNATS() error {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.srv.Shutdown()
	r.srv.WaitForShutdown()
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{Port: r.natsPort, StoreDir: r.storeDir, Log: r.quiet})
	if err != nil {
		return err
	}
	r.srv = srv
	if port := srv.Addr().(*net.TCPAddr).Port; port != r.natsPort {
		return fmt.Errorf("NATS came back on port %d, not %d", port, r.natsPort)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := r.js.Stream(ctx, events.UsageStream)
		cancel()
		if r.nc.IsConnected() && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the test's NATS connection did not come back: %v", err)
		}
	}
}

// terminatePostgres ends every connection to the test database but its own, as a failover or
// an administrator would.
func (r *reliability) terminatePostgres() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no PostgreSQL connection to terminate")
	}
	r.logf("terminated %d PostgreSQL connections", n)
	return nil
}

// checkStreamSettings checks that the meter process kept the test's short window and ack
// wait instead of putting its defaults back.
func (r *reliability) checkStreamSettings() {
	r.t.Helper()
	ctx := context.Background()
	stream, err := r.js.Stream(ctx, events.UsageStream)
	if err != nil {
		r.t.Fatal(err)
	}
	cons, err := r.js.Consumer(ctx, events.UsageStream, events.UsageConsumer)
	if err != nil {
		r.t.Fatal(err)
	}
	if got := stream.CachedInfo().Config.Duplicates; got != reliabilityDupWindow {
		r.t.Fatalf("the meter set the stream's duplicate window to %s, want %s", got, reliabilityDupWindow)
	}
	if got := cons.CachedInfo().Config.AckWait; got != reliabilityAckWait {
		r.t.Fatalf("the meter set the consumer's ack wait to %s, want %s", got, reliabilityAckWait)
	}
}

// waitDrained waits until the consumer has nothing pending or unacknowledged and the usage
// and rejection counts have stopped moving.
func (r *reliability) waitDrained() {
	r.t.Helper()
	ctx := context.Background()
	var last, state string
	r.waitFor(60*time.Second, "the meter did not drain the stream", func() bool {
		cons, err := r.js.Consumer(ctx, events.UsageStream, events.UsageConsumer)
		if err != nil {
			return false
		}
		info := cons.CachedInfo()
		var rejected int
		_ = r.pool.QueryRow(ctx, `SELECT coalesce(sum(rejected), 0) FROM usage_rejection_counts`).Scan(&rejected)
		prev := last
		state = fmt.Sprintf("stored %d, rejections %d, pending %d, ack pending %d, redelivered %d",
			r.stored(), rejected, info.NumPending, info.NumAckPending, info.NumRedelivered)
		last = state
		time.Sleep(300 * time.Millisecond)
		return info.NumPending == 0 && info.NumAckPending == 0 && state == prev
	})
	r.logf("%s", state)
}

// checkUsage: exactly the distinct valid events are stored, each once, each from its first
// publish and priced as the test prices it; the sums and the hourly rollups are exact.
func (r *reliability) checkUsage(valid []*sentEvent) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	byID := map[string]*sentEvent{}
	var charge, payable int64
	for _, e := range valid {
		byID[e.ev.ID] = e
		charge += e.charge
		payable += e.payable
	}
	rows, err := r.pool.Query(ctx, `SELECT event_id, stream_seq, charge_pico::text, payable_pico::text, account_id::text
		FROM usage_events`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID              string
		Seq             int64
		Charge, Payable string
		Account         string
	}
	stored, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var problems []string
	for _, s := range stored {
		e, ok := byID[s.ID]
		switch {
		case !ok:
			problems = append(problems, "stored an event that was never validly sent: "+s.ID)
		case seen[s.ID]:
			problems = append(problems, "stored twice: "+s.ID)
		case uint64(s.Seq) != e.seq:
			problems = append(problems, fmt.Sprintf("%s stored from stream sequence %d, not its first publish %d", s.ID, s.Seq, e.seq))
		case s.Charge != strconv.FormatInt(e.charge, 10) || s.Payable != strconv.FormatInt(e.payable, 10):
			problems = append(problems, fmt.Sprintf("%s charged %s (payable %s), want %d (%d): the first event must win",
				s.ID, s.Charge, s.Payable, e.charge, e.payable))
		case s.Account != e.customer:
			problems = append(problems, fmt.Sprintf("%s billed to %s, want %s", s.ID, s.Account, e.customer))
		}
		seen[s.ID] = true
	}
	for _, e := range valid {
		if !seen[e.ev.ID] {
			problems = append(problems, "never stored: "+e.ev.ID)
		}
	}
	if len(stored) != len(valid) || len(problems) > 0 {
		sort.Strings(problems)
		t.Errorf("%d usage rows, want the %d distinct valid events; %d problems, the first: %s",
			len(stored), len(valid), len(problems), strings.Join(problems[:min(len(problems), 10)], "; "))
	}

	var sumCharge, sumPayable, hourlyCharge, hourlyPayable string
	var hourlyRequests int
	if err := r.pool.QueryRow(ctx, `SELECT
		(SELECT coalesce(sum(charge_pico), 0)::text FROM usage_events), (SELECT coalesce(sum(payable_pico), 0)::text FROM usage_events),
		(SELECT coalesce(sum(requests), 0) FROM usage_hourly), (SELECT coalesce(sum(charge_pico), 0)::text FROM usage_hourly),
		(SELECT coalesce(sum(payable_pico), 0)::text FROM usage_hourly)`).Scan(
		&sumCharge, &sumPayable, &hourlyRequests, &hourlyCharge, &hourlyPayable); err != nil {
		t.Fatal(err)
	}
	wantCharge, wantPayable := strconv.FormatInt(charge, 10), strconv.FormatInt(payable, 10)
	if sumCharge != wantCharge || sumPayable != wantPayable {
		t.Errorf("usage sums to %s charged and %s payable, want exactly %s and %s (docs/failure-cases.md, case 8)", sumCharge, sumPayable, wantCharge, wantPayable)
	}
	if hourlyRequests != len(valid) || hourlyCharge != wantCharge || hourlyPayable != wantPayable {
		t.Errorf("hourly rollups hold %d requests, %s charged, %s payable; want %d, %s, %s",
			hourlyRequests, hourlyCharge, hourlyPayable, len(valid), wantCharge, wantPayable)
	}
	r.logf("usage: %d rows, %s picodollars charged, %s payable", len(stored), sumCharge, sumPayable)
}

// checkLedger: each customer's credit fell by its charges, each provider is owed its asks,
// the platform earned the difference, every ledger transaction sums to zero and every cached
// balance is the sum of its postings.
func (r *reliability) checkLedger(valid []*sentEvent) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	want := map[string]int64{}
	var revenue int64
	for _, e := range valid {
		want["customer_credit/"+e.customer] -= e.charge
		want["provider_payable/"+e.provider] += e.payable
		revenue += e.charge - e.payable
	}
	want["platform_revenue/"] = revenue
	rows, err := r.pool.Query(ctx, `SELECT kind || '/' || coalesce(owner_account_id::text, ''), balance::text FROM ledger_accounts`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var k, b string
		if err := rows.Scan(&k, &b); err != nil {
			t.Fatal(err)
		}
		got[k] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if got[k] != strconv.FormatInt(w, 10) {
			t.Errorf("ledger account %s: balance %q, want %d", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("ledger accounts %v, want only %v", got, want)
	}
	usageTxns := checkLedgerBalanced(t, ctx, r.pool)
	r.logf("ledger: %d usage transactions; revenue %d picodollars", usageTxns, revenue)
}

// checkLedgerBalanced checks that every ledger transaction has postings summing to zero and every cached balance is
// the sum of its account's postings, and returns how many usage transactions there are.
func checkLedgerBalanced(t *testing.T, ctx context.Context, pool *pgxpool.Pool) (usageTxns int) {
	t.Helper()
	var unbalanced, drifted int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT t.id FROM ledger_transactions t LEFT JOIN ledger_postings p ON p.transaction_id = t.id
			GROUP BY t.id HAVING count(p.id) = 0 OR sum(p.amount) <> 0) x),
		(SELECT count(*) FROM ledger_accounts a
			WHERE a.balance <> (SELECT coalesce(sum(p.amount), 0) FROM ledger_postings p WHERE p.ledger_account_id = a.id)),
		(SELECT count(*) FROM ledger_transactions WHERE kind = 'usage')`).Scan(&unbalanced, &drifted, &usageTxns); err != nil {
		t.Fatal(err)
	}
	if unbalanced > 0 {
		t.Errorf("%d ledger transactions do not sum to zero", unbalanced)
	}
	if drifted > 0 {
		t.Errorf("%d ledger accounts have a cached balance other than the sum of their postings (docs/failure-cases.md, case 13)", drifted)
	}
	return usageTxns
}

// checkRejections: every refusable event is counted once, against the rig whose subject it
// came on, with its reason, however often the faults made the stream deliver it; the first of
// each rig, reason and hour are kept whole, each one of those events; every re-send the stream
// let through after its window is refused as a duplicate; and every duplicate kept whole is
// such a re-send or a redelivery of a stored event.
func (r *reliability) checkRejections(valid []*sentEvent, bad []*badEvent) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	type rig struct{ provider, offering, reason string }
	rigOf := func(subject string, reason usageevent.RejectReason) rig {
		parts := strings.SplitN(subject, ".", 4)
		return rig{parts[1], parts[2], string(reason)}
	}
	want := map[rig]int{}
	badBySeq := map[uint64]*badEvent{}
	reasons := map[string]int{}
	for _, b := range bad {
		want[rigOf(b.subject, b.reason)]++
		badBySeq[b.seq] = b
		reasons[string(b.reason)]++
	}
	rows, err := r.pool.Query(ctx, `SELECT provider_id, offering_id, reason, sum(rejected)::int FROM usage_rejection_counts GROUP BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[rig]int{}
	var duplicates int
	for rows.Next() {
		var k rig
		var n int
		if err := rows.Scan(&k.provider, &k.offering, &k.reason, &n); err != nil {
			t.Fatal(err)
		}
		if k.reason == string(usageevent.RejectDuplicate) {
			duplicates += n
			continue
		}
		got[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("rig %s/%s: %d events counted as %s, want %d", k.provider, k.offering, got[k], k.reason, n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("rig %s/%s: %d events counted as %s, want none", k.provider, k.offering, n, k.reason)
		}
	}

	for _, d := range r.inWindow {
		if !d.duplicate {
			t.Errorf("the stream took the re-send of %s inside its %s window (sequence %d)", d.ev.ev.ID, reliabilityDupWindow, d.seq)
		}
	}
	resent := map[uint64]string{}
	for _, d := range r.late {
		if d.duplicate {
			t.Errorf("the stream dropped the re-send of %s after its window: case 5 of docs/failure-cases.md went untested", d.ev.ev.ID)
			continue
		}
		resent[d.seq] = d.ev.ev.ID
	}
	if duplicates < len(resent) {
		t.Errorf("%d duplicates counted, want at least the %d late re-sends", duplicates, len(resent))
	}

	// The samples: as many as the counts allow per rig, reason and hour, each one of the events
	// counted.
	var overfull int
	if err := r.pool.QueryRow(ctx, `
		SELECT count(*) FROM usage_rejection_counts c
		WHERE (SELECT count(*) FROM usage_rejections s WHERE split_part(s.subject, '.', 2) = c.provider_id
			AND split_part(s.subject, '.', 3) = c.offering_id AND s.reason = c.reason
			AND date_trunc('hour', s.received_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' = c.hour) <> least(c.rejected, $1)`,
		metering.DefaultRejectionSamples).Scan(&overfull); err != nil {
		t.Fatal(err)
	}
	if overfull != 0 {
		t.Errorf("%d rigs, reasons and hours keep other than their first %d refusals whole", overfull, metering.DefaultRejectionSamples)
	}
	storedSeq := map[string]uint64{}
	for _, e := range valid {
		storedSeq[e.ev.ID] = e.seq
	}
	rows, err = r.pool.Query(ctx, `SELECT stream_seq, subject, reason, event_id, detail FROM usage_rejections`)
	if err != nil {
		t.Fatal(err)
	}
	var samples, redelivered int
	for rows.Next() {
		var seq int64
		var subject, reason, eventID, detail string
		if err := rows.Scan(&seq, &subject, &reason, &eventID, &detail); err != nil {
			t.Fatal(err)
		}
		samples++
		if reason == string(usageevent.RejectDuplicate) {
			if _, late := resent[uint64(seq)]; !late {
				if storedSeq[eventID] != uint64(seq) {
					t.Errorf("duplicate kept at sequence %d of %q is neither a re-send nor a redelivery", seq, eventID)
				}
				redelivered++
			}
			continue
		}
		b := badBySeq[uint64(seq)]
		if b == nil || string(b.reason) != reason || b.eventID != eventID || b.subject != subject || detail == "" {
			t.Errorf("kept at sequence %d: %s %q on %s (%q); want one of the refusable events with its reason", seq, reason, eventID, subject, detail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	r.logf("rejections: %v counted once each; %d duplicates counted (%d late re-sends refused by the database, %d in-window "+
		"re-sends dropped by the stream); %d kept whole, %d of them redeliveries of stored events", reasons, duplicates,
		len(resent), len(r.inWindow), samples, redelivered)
}

// summariseMeterLog reports what the meter processes said about the faults.
func (r *reliability) summariseMeterLog() {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	log := string(b)
	r.logf("meter log: %d batches retried, %d NATS disconnects, %d reconnects, %d errors",
		strings.Count(log, "batch not committed"), strings.Count(log, "NATS connection lost"),
		strings.Count(log, "NATS connection restored"), strings.Count(log, "level=ERROR"))
}

func (r *reliability) dumpMeterLog() {
	b, _ := os.ReadFile(r.logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	r.t.Logf("last lines of the meter's log (%s):\n%s", r.logPath, strings.Join(lines[max(0, len(lines)-80):], "\n"))
}
