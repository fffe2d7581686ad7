// Package webhooks sends an account's events to the endpoints it registered, signed as the
// Standard Webhooks specification says (docs/webhooks.md). It owns the tables webhook_endpoints,
// webhook_events, webhook_deliveries and webhook_attempts.
//
// Invariants:
//   - An event is recorded in the transaction of what happened (Emit), once per account and
//     event id however often its caller retries, with one delivery per endpoint subscribed to
//     its type at that moment.
//   - Every attempt of a delivery carries the same webhook-id (the event's id), is signed with
//     the endpoint's secret over "id.timestamp.body", and is logged with what came back.
//   - A delivery is attempted by one worker at a time: a worker claims it with a lease (FOR
//     UPDATE SKIP LOCKED) and records its outcome only while the lease is its own.
//   - Outbound requests follow no redirect and reach no loopback, private or link-local address
//     unless the platform is configured to allow them (development and tests).
//   - An account reads and changes only its own endpoints and deliveries.
//
// Tables of other packages it reads: none. It writes only its own.
package webhooks

import (
	"crypto/sha256"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Defaults of Config.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultLease      = time.Minute
	DefaultPollEvery  = 2 * time.Second
	DefaultBatch      = 20
	MaxEndpoints      = 20   // per account
	ResponseBodyLimit = 4096 // bytes of each answer kept in the log
)

// DefaultSchedule is how long a delivery waits after each failed attempt before the next: after
// the last, it is failed. Seven attempts over about 18 hours, as the specification suggests.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}

// Config wires the service.
type Config struct {
	Pool *pgxpool.Pool
	// Key seals the endpoints' signing secrets in the database: at least 32 bytes, from the
	// environment. Changing it makes every stored secret unreadable. Without it the service
	// records events (Emit) and reads the log, but neither adds endpoints nor delivers: a
	// process that only emits needs none.
	Key []byte
	// AllowPrivate lets endpoints be plain http and reach loopback, private and link-local
	// addresses: for development and tests only.
	AllowPrivate bool
	// Schedule is the wait after each failed attempt (nil: DefaultSchedule).
	Schedule []time.Duration
	// Timeout bounds each attempt, from dialling to the end of the answer (0: DefaultTimeout).
	Timeout time.Duration
	// Lease is how long a worker holds a delivery it claimed (0: DefaultLease); it must be longer
	// than Timeout.
	Lease time.Duration
	// PollEvery is how often the worker looks for due deliveries (0: DefaultPollEvery).
	PollEvery time.Duration
	Now       func() time.Time // nil means time.Now
	Log       *slog.Logger
}

// Service keeps endpoints, records events and delivers them.
type Service struct {
	pool         *pgxpool.Pool
	key          [32]byte
	sealing      bool // a key was given
	allowPrivate bool
	schedule     []time.Duration
	timeout      time.Duration
	lease        time.Duration
	pollEvery    time.Duration
	now          func() time.Time
	log          *slog.Logger
	client       *http.Client
	wake         chan struct{}
}

// New returns the service; it panics without a pool, or with a key shorter than 32 bytes.
func New(cfg Config) *Service {
	if cfg.Pool == nil || (len(cfg.Key) > 0 && len(cfg.Key) < 32) {
		panic("webhooks.New: a pool is required, and a key is at least 32 bytes")
	}
	s := &Service{pool: cfg.Pool, key: sha256.Sum256(cfg.Key), sealing: len(cfg.Key) > 0, allowPrivate: cfg.AllowPrivate, schedule: cfg.Schedule,
		timeout: cfg.Timeout, lease: cfg.Lease, pollEvery: cfg.PollEvery, now: cfg.Now, log: cfg.Log, wake: make(chan struct{}, 1)}
	if s.schedule == nil {
		s.schedule = DefaultSchedule
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.lease <= 0 {
		s.lease = DefaultLease
	}
	if s.lease <= s.timeout {
		s.lease = s.timeout + 30*time.Second
	}
	if s.pollEvery <= 0 {
		s.pollEvery = DefaultPollEvery
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.client = newClient(s.timeout, s.allowPrivate)
	return s
}

// EventType is a kind of event an endpoint may subscribe to.
type EventType struct {
	Name string `json:"name"`
	// Provider is true for a provider's events, false for a customer's.
	Provider    bool   `json:"-"`
	Description string `json:"description"`
}

// TypeTest is the event an account sends its own endpoint to try it.
const TypeTest = "webhook.test"

// EventTypes are the events the platform sends, in the order pages list them: an endpoint
// subscribes to some of them, or to all. A package that emits a new type adds it here.
var EventTypes = []EventType{
	{Name: "invoice.issued", Description: "An invoice to you was issued."},
	{Name: "batch.completed", Description: "A batch finished and its output file is ready."},
	{Name: "budget.threshold", Description: "Spending reached a threshold of a key's limit, a person's limit or the account's budget."},
	{Name: "credit.low", Description: "The account's balance fell below the amount its alert names."},
	{Name: "topup.failed", Description: "An automatic top-up was declined or needs your authentication: auto top-up is off until you turn it on again."},
	{Name: "payout.paid", Provider: true, Description: "A statement's payout was transferred to your Stripe account."},
	{Name: "rig.offline", Provider: true, Description: "A rig of yours went offline: its agent stopped sending heartbeats."},
}

// EventTypesFor are the event types an account of the kind receives.
func EventTypesFor(provider bool) []EventType {
	var out []EventType
	for _, t := range EventTypes {
		if t.Provider == provider {
			out = append(out, t)
		}
	}
	return out
}

// Delivers reports whether the service can add endpoints and deliver: it was given a key.
func (s *Service) Delivers() bool { return s.sealing }

var errNoKey = services.Errorf(services.CodeUnavailable, "Webhooks are not available on this server: GPUMARKET_WEBHOOK_KEY is not set.")

func knownType(name string) bool {
	for _, t := range EventTypes {
		if t.Name == name {
			return true
		}
	}
	return false
}
