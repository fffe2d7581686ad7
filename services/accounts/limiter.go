package accounts

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// LoginLimiter slows password guessing: each key (an email, or a client address) gets a burst
// of 5 attempts, refilled at one every 12 seconds. It lives in memory, so each web replica
// counts on its own; that bounds guessing per replica, which is what it is for.
type LoginLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*rate.Limiter
	swept   time.Time
}

const (
	loginBurst    = 5
	loginInterval = 12 * time.Second
)

// NewLoginLimiter returns a limiter on the given clock.
func NewLoginLimiter(now func() time.Time) *LoginLimiter {
	return &LoginLimiter{now: now, buckets: map[string]*rate.Limiter{}}
}

// Allow spends one attempt from every key and reports whether all of them had one left.
func (l *LoginLimiter) Allow(keys ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.swept) > 10*time.Minute {
		for k, b := range l.buckets {
			if b.TokensAt(now) >= loginBurst {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	ok := true
	for _, k := range keys {
		if k == "" {
			continue
		}
		b := l.buckets[k]
		if b == nil {
			b = rate.NewLimiter(rate.Every(loginInterval), loginBurst)
			l.buckets[k] = b
		}
		if !b.AllowN(now, 1) {
			ok = false
		}
	}
	return ok
}
