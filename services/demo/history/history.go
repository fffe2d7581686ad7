// Package history seeds the demo customers with the traffic of the Days whole UTC days before
// today (and the whole previous month), made the way live traffic is made, so that every figure a page shows of it (usage,
// balances, earnings, the ledger) has the provenance of live traffic. Nothing is written
// straight into a usage or ledger table: each request is routed on paper and goes through the
// platform's own code at its past time, on a simulated clock (see docs/demo-history.md):
//
//   - the gateway's part: a route ticket signed with the platform's signer (services/ticket) with
//     the terms routing fixes (the offering's asks, the price book row in force for the tier at
//     that moment, the bounds on billable tokens of routing.BoundsFor), and the gateway's record
//     of each attempt (requestlog.RequestLog): what it relayed and how the attempt ended;
//   - the rig's part: its usage event (metering.NewEvent, Encode), on its offering's subject;
//   - the meter's part: a metering.Meter whose clock is the simulated one meters each day's
//     events in one batch (ProcessMessages), with every check it makes of live events, and
//     posts that day's ledger transactions;
//   - credit: purchases through credits.Credits completed by signed checkout.session.completed
//     webhooks, and a refund by a signed charge.refunded, handled by credits.StripeWebhook at
//     their past times.
//
// The rules (customers, workloads, rhythm, failures, credit, the price change) are in rules.go.
// Seeding is idempotent: the history resumes after the last day it metered, so a second run on
// the same day adds nothing, and a run days later adds the days since; every id it makes is
// derived from its account, workload, date and place in the day, so that the meter's unique
// keys would refuse a second copy of any event. Admission is followed too: a customer whose
// credit is spent makes no request until it buys more.
//
// It writes and reads through the services that own the tables: among its reads, the latest
// usage of its own API keys, to know where to resume, and the latest usage of the tier whose
// price it changes, so as never to change a price already billed (metering.LatestUsageOfKeys,
// metering.LatestUsageOfTier).
package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// Config wires the history.
type Config struct {
	Pool *pgxpool.Pool
	// TicketKey signs the history's route tickets: the platform's key when it has one. Nil
	// makes a key for the run: the tickets are checked by the history's own meter as it runs
	// and kept nowhere, so no other process needs the key.
	TicketKey []byte
	Log       *slog.Logger
}

// Result says what a run of the history added.
type Result struct {
	Days      int // days metered
	Requests  int // gateway requests served (a failover counts once)
	Events    int // usage events metered: one per attempt
	Refused   int // requests admission refused: their customer's credit was spent
	Purchases int
	Refunds   int
	Took      time.Duration
}

// Seed adds what is missing of the history before now's UTC day. The demo data must be seeded
// first (demo.Seed): its users, offerings and price book.
func Seed(ctx context.Context, cfg Config, now time.Time) (res Result, err error) {
	defer services.Wrap(&err, "history.Seed")
	began := time.Now()
	h, err := open(ctx, cfg, now)
	if err != nil {
		return res, err
	}
	from, err := h.resumeFrom(ctx)
	if err != nil {
		return res, err
	}
	for day := from; day.Before(h.today); day = day.AddDate(0, 0, 1) {
		if err := h.seedDay(ctx, day, &res); err != nil {
			return res, fmt.Errorf("%s: %w", day.Format(time.DateOnly), err)
		}
		res.Days++
	}
	if err := h.touchKeys(ctx); err != nil {
		return res, err
	}
	if err := h.measure(ctx); err != nil {
		return res, err
	}
	res.Took = time.Since(began)
	if res.Days > 0 {
		h.log.Info("demo history seeded", "days", res.Days, "requests", res.Requests, "events", res.Events,
			"refused", res.Refused, "purchases", res.Purchases, "refunds", res.Refunds, "took", res.Took.Round(time.Millisecond))
	}
	return res, nil
}

// history is one run: its services on the simulated clock and what it knows of the demo.
type history struct {
	pool        *pgxpool.Pool
	log         *slog.Logger
	clock       *clock
	now         time.Time
	today       time.Time // midnight UTC of now's day: the history ends before it
	start       time.Time // its first day
	accounts    *accounts.Service
	catalog     *catalog.Service
	credits     *credits.Credits
	webhook     *credits.StripeWebhook
	webhookKey  string
	requestLog  *requestlog.RequestLog
	meter       *metering.Meter
	signer      *ticket.Signer
	book        catalog.PriceBook
	offerings   []offering
	customers   []*customer
	financeUser accounts.User
}

func open(ctx context.Context, cfg Config, now time.Time) (*history, error) {
	now = now.UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	h := &history{pool: cfg.Pool, log: cfg.Log, clock: &clock{}, now: now, today: today, start: firstDay(today)}
	if h.log == nil {
		h.log = slog.Default()
	}
	if demo.PriceBookStart(now).After(h.start) {
		return nil, fmt.Errorf("the demo's price book starts %s, after the history's first day %s",
			demo.PriceBookStart(now).Format(time.DateOnly), h.start.Format(time.DateOnly))
	}
	h.clock.set(h.start)
	var err error
	// This service makes the history's API keys, at the simulated time; it signs no session.
	if h.accounts, err = accounts.NewService(cfg.Pool, accounts.Config{SessionKey: []byte(randomHex(32)), Now: h.clock.now}); err != nil {
		return nil, err
	}
	h.catalog = catalog.NewService(cfg.Pool, catalog.Config{Now: h.clock.now})
	ledger := ledger.NewLedger(cfg.Pool, h.clock.now)
	h.credits = credits.NewCredits(cfg.Pool, ledger, pastCheckout{h.clock.now}, h.clock.now)
	// The history's webhooks are signed and verified with a secret of its own: they are made
	// and handled here, and never sent over the network.
	h.webhookKey = "whsec_history_" + randomHex(24)
	h.webhook = credits.NewStripeWebhook(h.credits, []string{h.webhookKey})
	h.requestLog = requestlog.NewRequestLog(cfg.Pool, nil, h.clock.now, h.log)
	key := cfg.TicketKey
	if len(key) == 0 {
		key = []byte(randomHex(32))
	}
	if h.signer, err = ticket.NewSigner(key); err != nil {
		return nil, err
	}
	h.meter = metering.NewMeter(metering.MeterConfig{Pool: cfg.Pool, Ledger: ledger, Tickets: h.signer,
		Now: h.clock.now, Log: h.log})

	if h.financeUser, err = h.accounts.UserByEmail(ctx, financeEmail); err != nil {
		return nil, fmt.Errorf("%s: %w (seed the demo first)", financeEmail, err)
	}
	if err := h.ensurePriceChange(ctx); err != nil {
		return nil, err
	}
	if h.book, err = h.catalog.PriceBook(ctx); err != nil {
		return nil, err
	}
	if h.offerings, err = h.demoOfferings(ctx); err != nil {
		return nil, err
	}
	for _, c := range Customers {
		cs, err := h.openCustomer(ctx, c)
		if err != nil {
			return nil, err
		}
		h.customers = append(h.customers, cs)
	}
	return h, nil
}

// resumeFrom is the first day to make: the day after the last one metered with the history's
// keys, or its first day when that is later.
func (h *history) resumeFrom(ctx context.Context) (time.Time, error) {
	var keys []string
	for _, c := range h.customers {
		for _, id := range c.keys {
			keys = append(keys, id)
		}
	}
	l, ok, err := metering.LatestUsageOfKeys(ctx, h.pool, keys)
	if err != nil {
		return time.Time{}, fmt.Errorf("the history's last metered day: %w", err)
	}
	if !ok {
		return h.start, nil
	}
	next := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, time.UTC)
	if next.Before(h.start) {
		return h.start, nil
	}
	return next, nil
}

// touchKeys records when the history's keys were last used, as the gateway does.
func (h *history) touchKeys(ctx context.Context) error {
	used := map[string]time.Time{}
	for _, c := range h.customers {
		for id, at := range c.lastUsed {
			used[id] = at
		}
	}
	return h.accounts.TouchKeys(ctx, used)
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
