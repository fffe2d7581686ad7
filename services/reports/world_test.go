package reports_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// world is a platform's usage side on a fresh database: customers, providers with rigs in
// regions and sites, the price book of the three tiers, the real meter (fed usage events as
// the stream delivers them, with the gateway's records written first), and the reports.
type world struct {
	t        *testing.T
	pool     *pgxpool.Pool
	ledger   *ledger.Ledger
	audit    *audit.Log
	meter    *metering.Meter
	requests *requestlog.RequestLog
	signer   *ticket.Signer
	reports  *reports.Service

	mu   sync.Mutex
	now  time.Time
	seq  int
	keys map[string]string
	// prices are the price book's rows per tier, in order of effective_from.
	prices map[string][]priceRow
}

type priceRow struct {
	id      int64
	from    time.Time
	in, out int64
}

const model = "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B"

var jan1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, pool: dbtest.New(t), now: jan1, keys: map[string]string{}, prices: map[string][]priceRow{}}
	w.ledger = ledger.NewLedger(w.pool, w.clock)
	w.audit = audit.New(w.pool, w.clock)
	w.requests = requestlog.NewRequestLog(w.pool, metering.GatewayReads{}, w.clock, nil)
	w.signer, _ = ticket.NewSigner([]byte(strings.Repeat("k", 32)))
	w.meter = metering.NewMeter(metering.MeterConfig{Pool: w.pool, Ledger: w.ledger, Tickets: w.signer, Now: w.clock})
	w.reports = reports.New(w.pool)
	// The tiers' prices per million input/output tokens: realtime $0.60/$1.20, standard
	// $0.15/$0.30, batch $0.07/$0.13.
	w.price("realtime", jan1, 600_000, 1_200_000)
	w.price("standard", jan1, 150_000, 300_000)
	w.price("batch", jan1, 70_000, 130_000)
	return w
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *world) at(t time.Time) {
	w.mu.Lock()
	w.now = t
	w.mu.Unlock()
}

func (w *world) ctx() context.Context { return context.Background() }

func (w *world) scan(sql string, args []any, dst ...any) {
	w.t.Helper()
	if err := w.pool.QueryRow(w.ctx(), sql, args...).Scan(dst...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

func (w *world) account(name string) string {
	w.t.Helper()
	return fixtures.Account(w.t, w.pool, name)
}

func (w *world) user(account, email, role string) string {
	w.t.Helper()
	return fixtures.User(w.t, w.pool, account, email, role)
}

func (w *world) price(tier string, from time.Time, in, out int64) int64 {
	w.t.Helper()
	id := fixtures.Price(w.t, w.pool, tier, from, in, out)
	w.prices[tier] = append(w.prices[tier], priceRow{id: id, from: from, in: in, out: out})
	return id
}

// priceAt is the tier's price in force at t.
func (w *world) priceAt(tier string, t time.Time) priceRow {
	var p priceRow
	for _, r := range w.prices[tier] {
		if !r.from.After(t) {
			p = r
		}
	}
	return p
}

// rig is a provider's offering: its GPUs, region, site and stated PUE (nil: the site's default).
type rig struct {
	provider, offering string
	gpu                string
	gpuCount           int
	region, site       string
	pue                *float64
}

func (w *world) rig(provider, gpu string, gpuCount int, region, site string, pue *float64) rig {
	w.t.Helper()
	id := fixtures.Offering(w.t, w.pool, provider, fixtures.WithGPU(gpu, gpuCount), fixtures.WithRegion(region),
		fixtures.WithModel(model), fixtures.WithAsk(60000, 120000), fixtures.WithSite(site, pue))
	return rig{provider: provider, offering: id, gpu: gpu, gpuCount: gpuCount, region: region, site: site, pue: pue}
}

// request is one request a customer made of a rig on a tier.
type request struct {
	customer string
	rig      rig
	tier     catalog.Tier
	at       time.Time
	in, out  int64
	energyJ  float64
	measured bool
	// simulated: the energy came from a simulated power sensor
	simulated bool
	duration  float64 // ms; 0 is 800
}

// use routes, records and meters a request as the platform would, priced at its tier's price
// in force at its time.
func (w *world) use(r request) {
	w.t.Helper()
	if r.duration == 0 {
		r.duration = 800
	}
	w.mu.Lock()
	w.seq++
	n := w.seq
	w.mu.Unlock()
	requestID := fmt.Sprintf("req_%06d", n)
	key := w.apiKey(r.customer)
	claims := ticket.Claims{RequestID: requestID, AccountID: r.customer, APIKeyID: key, OfferingID: r.rig.offering,
		Tier: string(r.tier), AskInput: 60000, AskOutput: 120000, PriceID: w.priceAt(string(r.tier), r.at).id,
		MaxInputTokens: r.in, MaxOutputTokens: max(r.out, 1), IssuedAt: r.at.Add(-time.Duration(r.duration)*time.Millisecond - time.Second)}
	tk, err := w.signer.Sign(claims)
	if err != nil {
		w.t.Fatal(err)
	}
	source := usage.EnergyEstimated
	if r.measured {
		source = usage.EnergyMeasured
	}
	if r.simulated {
		source = usage.EnergySimulated
	}
	ev := usage.NewEvent(fmt.Sprintf("evt_%06d", n), r.rig.provider, r.rig.offering, r.at, usage.Usage{
		RequestID: requestID, Ticket: tk, OfferingID: r.rig.offering, Model: model, InputTokens: r.in,
		OutputTokens: r.out, TTFTMillis: 90, DurationMillis: r.duration, EnergyJoules: r.energyJ, EnergySource: source,
		Status: usage.StatusOK})
	body, err := usage.Encode(ev)
	if err != nil {
		w.t.Fatal(err)
	}
	w.requests.Record(requestlog.GatewayRequest{RequestID: requestID, AccountID: r.customer, APIKeyID: key, OfferingID: r.rig.offering,
		Tier: r.tier, Model: model, HTTPStatus: 200, Status: requestlog.GatewayOK,
		Duration: time.Duration(r.duration) * time.Millisecond, At: r.at, InputBytes: 4 * r.in, MaxInputTokens: r.in,
		MaxOutputTokens: max(r.out, 1), Streamed: true, RelayedOutputBytes: 4 * r.out, RelayedOutputChunks: r.out})
	if err := w.requests.Flush(w.ctx()); err != nil {
		w.t.Fatal(err)
	}
	w.at(r.at.Add(time.Second))
	res, err := w.meter.ProcessMessages(w.ctx(), []metering.Message{{Seq: uint64(n),
		Subject: events.UsageSubject(r.rig.provider, r.rig.offering), Data: body}})
	if err != nil {
		w.t.Fatal(err)
	}
	if res.Stored != 1 {
		var why []string
		for _, rej := range res.Rejections {
			why = append(why, string(rej.Reason)+": "+rej.Detail)
		}
		w.t.Fatalf("the meter stored %d of the request at %s: refused %v", res.Stored, r.at, why)
	}
}

func (w *world) apiKey(customer string) string {
	w.t.Helper()
	if k, ok := w.keys[customer]; ok {
		return k
	}
	user := w.user(customer, customer+"@example.test", "developer")
	key := fixtures.APIKey(w.t, w.pool, customer, user, "key")
	w.keys[customer] = key
	return key
}

// invoicing is the close over the same database and clock.
func (w *world) invoicing() *invoicing.Service {
	return invoicing.New(invoicing.Config{Pool: w.pool, Ledger: w.ledger, Audit: w.audit, Now: w.clock,
		Seller: invoicing.Party{LegalName: "gpumarket Ltd", Address: "1 Dock Road\nDublin", Country: "IE"}})
}
