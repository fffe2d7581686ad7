package routing

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeCatalog serves offerings and the price book from memory.
type fakeCatalog struct {
	mu        sync.Mutex
	offerings []catalog.Offering
	book      catalog.PriceBook
}

func (f *fakeCatalog) ListActive(context.Context) ([]catalog.Offering, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]catalog.Offering(nil), f.offerings...), nil
}

func (f *fakeCatalog) PriceBook(context.Context) (catalog.PriceBook, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.book, nil
}

func (f *fakeCatalog) add(os ...catalog.Offering) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offerings = append(f.offerings, os...)
}

// defaultPrices is catalog.DefaultPrices in force since long ago, rows 1 to 3: realtime $0.30 in and $0.60 out
// per million tokens, standard $0.15 and $0.30, batch $0.08 and $0.16.
func defaultPrices() catalog.PriceBook {
	book := catalog.PriceBook{}
	for i, p := range catalog.DefaultPrices {
		p.ID = int64(i + 1)
		book[p.Tier] = []catalog.Price{p}
	}
	return book
}

func f64(v float64) *float64 { return &v }

// offering is an active offering of model in tier, with no figures, whose asks are split from a blended ask
// in the default prices' 1:2 ratio: a third of twice it per input token, the rest per output token, so that
// the two sum to exactly twice the blend. It is offered in its tier exactly when the blend is at most the
// tier's blended price (standard $0.225, batch $0.12, realtime $0.45).
func offering(id, model string, tier catalog.Tier, blend money.MicroUSD) catalog.Offering {
	in := 2 * blend / 3
	return asking(id, model, tier, in, 2*blend-in)
}

// asking is an active offering of model in tier with these asks per input and output token, its rig qualified.
func asking(id, model string, tier catalog.Tier, in, out money.MicroUSD) catalog.Offering {
	return catalog.Offering{ID: id, ProviderAccountID: "provider-" + id, Model: model, Tier: tier, AskInput: in, AskOutput: out,
		Status: catalog.StatusActive, RigState: catalog.RigActive}
}

// pending is the offering with its rig not yet qualified.
func pending(o catalog.Offering) catalog.Offering {
	o.RigState = catalog.RigPending
	return o
}

// claims gives an offering claimed P50 and P99 times to first token.
func claims(o catalog.Offering, p50, p99 float64) catalog.Offering {
	o.ClaimedTTFTP50Ms, o.ClaimedTTFTP99Ms = f64(p50), f64(p99)
	return o
}

type bundle struct {
	r     *Router
	clock *clock
	cat   *fakeCatalog
}

// setup returns a router over the offerings, loaded, with a heartbeat from every one of them.
func setup(t testing.TB, offerings ...catalog.Offering) bundle {
	t.Helper()
	b := bundle{clock: newClock(), cat: &fakeCatalog{offerings: offerings, book: defaultPrices()}}
	b.r = New(Config{Catalog: b.cat, Now: b.clock.Now, Rand: rand.New(rand.NewPCG(1, 2)),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := b.r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, o := range offerings {
		b.beat(o, 0, 8)
	}
	return b
}

// beat records a heartbeat from the offering's rig now.
func (b bundle) beat(o catalog.Offering, inFlight, capacity int) {
	b.r.recordHeartbeat(Heartbeat{OfferingID: o.ID, ProviderID: o.ProviderAccountID, InFlight: inFlight,
		Capacity: capacity, At: b.clock.Now()})
}

// observe records n gateway observations of the offering with this time to first token, ending now.
func (b bundle) observe(id string, n int, ttftMs float64) {
	for range n {
		b.r.Observe(id, Observation{TTFT: millis(ttftMs), Streamed: true, Duration: millis(ttftMs + 1000), InputTokens: 100,
			OutputTokens: 100, Status: usage.StatusOK})
	}
}

// pickIDs returns the ids Pick chose, in order.
func (b bundle) pickIDs(t testing.TB, req Request) []string {
	t.Helper()
	cs, err := b.r.Pick(req)
	if err != nil {
		t.Fatalf("Pick(%+v) = %v", req, err)
	}
	return ids(cs)
}

func ids(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.OfferingID
	}
	return out
}

// wantPickError checks that Pick fails with the cause and the application error code.
func wantPickError(t *testing.T, r *Router, req Request, cause error, code services.Code) {
	t.Helper()
	cs, err := r.Pick(req)
	if !errors.Is(err, cause) || services.ErrorCode(err) != code {
		t.Fatalf("Pick(%+v) = %v, %v; want %v (%s)", req, ids(cs), err, cause, code)
	}
}
