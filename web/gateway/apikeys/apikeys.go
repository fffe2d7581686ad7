// Package apikeys holds what a /v1 gateway process keeps of API keys between requests: the keys it read, by
// secret (Cache), each key's token bucket (Limits) and when each key was last used, written in batches
// (Touches). The gateway (package gateway), its only importer, authenticates requests with them; this package
// imports none of the gateway's packages.
package apikeys

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"golang.org/x/time/rate"
)

// TouchEvery is how often the keys' last use is written.
const TouchEvery = time.Second

// maxCachedKeys bounds the key cache; a flood of made-up keys empties it rather than grow it.
const maxCachedKeys = 10_000

// NewCache returns an empty cache whose keys are read again after ttl.
func NewCache(ttl time.Duration) *Cache {
	return &Cache{ttl: ttl, entries: map[[32]byte]entry{}}
}

// NewLimits returns the token buckets of keys that may make perSecond requests a second, burst at once.
func NewLimits(perSecond float64, burst int) *Limits {
	return &Limits{rate: rate.Limit(perSecond), burst: burst, byKey: map[string]*rate.Limiter{}}
}

// NewTouches returns the record of keys' last use, written by write.
func NewTouches(write func(context.Context, map[string]time.Time) error, log *slog.Logger) *Touches {
	return &Touches{write: write, log: log, pending: map[string]time.Time{}}
}

// Cache remembers API keys, and secrets that are none, for ttl. A key revoked or changed
// is forgotten at once when word of it arrives (Forget; see package gateway's keychanges.go), so ttl bounds
// only how stale a key can be when that word is lost.
type Cache struct {
	ttl     time.Duration
	mu      sync.RWMutex
	entries map[[32]byte]entry // by the secret's SHA-256
	// forgets counts calls to Forget: a lookup that read the database before a Forget does
	// not cache what it read, which may be the key as it was before the change.
	forgets uint64
}

type entry struct {
	key   accounts.APIKey
	valid bool
	at    time.Time
}

// Lookup returns the live key a secret proves, asking find on a miss.
func (kc *Cache) Lookup(ctx context.Context, secret string, now time.Time,
	find func(context.Context, string) (accounts.APIKey, error)) (accounts.APIKey, error) {
	h := sha256.Sum256([]byte(secret))
	kc.mu.RLock()
	e, ok := kc.entries[h]
	forgets := kc.forgets
	kc.mu.RUnlock()
	if !ok || now.Sub(e.at) >= kc.ttl {
		key, err := find(ctx, secret)
		if err != nil && services.ErrorCode(err) != services.CodeUnauthorized {
			return accounts.APIKey{}, err
		}
		e = entry{key: key, valid: err == nil, at: now}
		kc.mu.Lock()
		if kc.forgets == forgets {
			if len(kc.entries) >= maxCachedKeys {
				clear(kc.entries)
			}
			kc.entries[h] = e
		}
		kc.mu.Unlock()
	}
	if !e.valid {
		return accounts.APIKey{}, services.Errorf(services.CodeUnauthorized, "Invalid API key.")
	}
	return e.key, nil
}

// Forget drops the cached entry of the key with this id, if any.
func (kc *Cache) Forget(keyID string) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.forgets++
	for h, e := range kc.entries {
		if e.valid && e.key.ID == keyID {
			delete(kc.entries, h)
		}
	}
}

// Limits is a token bucket per API key.
type Limits struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	byKey map[string]*rate.Limiter
}

// Take takes a token from the key's bucket; when there is none, it returns how long until
// there is one, and takes nothing.
func (l *Limits) Take(keyID string, now time.Time) time.Duration {
	l.mu.Lock()
	lim := l.byKey[keyID]
	if lim == nil {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.byKey[keyID] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// Touches writes when keys were last used, in batches: at most one write per TouchEvery.
// What is pending when the process stops is not written: last use is informative.
type Touches struct {
	write     func(context.Context, map[string]time.Time) error
	log       *slog.Logger
	mu        sync.Mutex
	pending   map[string]time.Time
	scheduled bool
	// timer is the write scheduled, writing the write under way (close waits for it), and
	// closed says no other is scheduled.
	timer   *time.Timer
	writing sync.WaitGroup
	closed  bool
}

// Touch records that the key was used at at, to be written with the others within TouchEvery.
func (t *Touches) Touch(keyID string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[keyID] = at
	if !t.scheduled && !t.closed {
		t.scheduled = true
		t.writing.Add(1)
		t.timer = time.AfterFunc(TouchEvery, func() {
			defer t.writing.Done()
			t.flush()
		})
	}
}

// Close cancels the write scheduled, waits for one under way and schedules no other.
func (t *Touches) Close() {
	t.mu.Lock()
	t.closed = true
	if t.timer != nil && t.timer.Stop() {
		t.writing.Done() // stopped before it ran: it never will
	}
	t.mu.Unlock()
	t.writing.Wait()
}

func (t *Touches) flush() {
	t.mu.Lock()
	batch := t.pending
	t.pending, t.scheduled = make(map[string]time.Time, len(batch)), false
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.write(ctx, batch); err != nil {
		t.log.Warn("gateway: recording when API keys were last used failed", "keys", len(batch), "err", err)
	}
}
