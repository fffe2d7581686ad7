package accounts

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"time"
)

// The budgets below, and why, are in docs/web-security.md ("Logins and sign-ups").
const (
	// Failed logins per account and client address: 5 at once, then one every 12 s.
	loginPairBurst    = 5
	loginPairInterval = 12 * time.Second
	// Failed logins per client address, whatever the accounts: 100 at once, then one every 3 s
	// (1,200 an hour). An office or a proxy shares it; it is what stops one address from trying
	// a few passwords on every account.
	loginAddressBurst    = 100
	loginAddressInterval = 3 * time.Second
	// Sign-ups per client address: 10 at once, then one every 2 minutes.
	signupBurst    = 10
	signupInterval = 2 * time.Minute
	// E-mailed links (password resets by client address, verification links by user): 5 at
	// once, then one every 2 minutes, so that the form sends no flood of mail.
	resetBurst    = 5
	resetInterval = 2 * time.Minute
	// DefaultTrackedKeys bounds the buckets a limiter keeps: about 64 bytes each, so a flood of
	// made-up emails costs at most a few megabytes.
	DefaultTrackedKeys = 100_000
)

// budget is a token bucket's shape: burst tokens, one more every interval up to burst.
type budget struct {
	burst    float64
	interval time.Duration
}

var (
	loginPairBudget    = budget{burst: loginPairBurst, interval: loginPairInterval}
	loginAddressBudget = budget{burst: loginAddressBurst, interval: loginAddressInterval}
	signupBudget       = budget{burst: signupBurst, interval: signupInterval}
	resetBudget        = budget{burst: resetBurst, interval: resetInterval}
)

// limiter keeps token buckets by key, in memory, at most max of them: at the cap it forgets
// the bucket touched longest ago, which has had the most time to refill. Keys are stored as
// hashes, so an email's length does not change the cost of a bucket. Each web replica keeps its
// own, so the budgets are per replica.
type limiter struct {
	mu    sync.Mutex
	now   func() time.Time
	max   int
	order *list.List // of *bucket, most recently touched first
	byKey map[bucketKey]*list.Element
}

type bucketKey [16]byte

type bucket struct {
	key    bucketKey
	tokens float64
	at     time.Time
}

func newLimiter(now func() time.Time, max int) *limiter {
	if max <= 0 {
		max = DefaultTrackedKeys
	}
	return &limiter{now: now, max: max, order: list.New(), byKey: map[bucketKey]*list.Element{}}
}

// charge is one key and the budget it is counted against.
type charge struct {
	key    string
	budget budget
}

func keyOf(s string) bucketKey {
	sum := sha256.Sum256([]byte(s))
	return bucketKey(sum[:16])
}

// take spends one token from every charge's bucket when each has one, and reports whether it
// did; when any is empty it spends nothing.
func (l *limiter) take(charges ...charge) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	buckets := make([]*bucket, len(charges))
	for i, c := range charges {
		b := l.bucket(keyOf(c.key), c.budget, now)
		if b.tokens < 1 {
			return false
		}
		buckets[i] = b
	}
	for _, b := range buckets {
		b.tokens--
	}
	return true
}

// give returns the token take spent from every charge's bucket: the attempt did not count.
func (l *limiter) give(charges ...charge) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, c := range charges {
		b := l.bucket(keyOf(c.key), c.budget, now)
		b.tokens = min(b.tokens+1, c.budget.burst)
	}
}

// bucket returns the key's bucket refilled to now, making a full one (and forgetting the
// least recently touched at the cap) when the key has none.
func (l *limiter) bucket(k bucketKey, bud budget, now time.Time) *bucket {
	if el, ok := l.byKey[k]; ok {
		b := el.Value.(*bucket)
		if elapsed := now.Sub(b.at); elapsed > 0 {
			b.tokens = min(b.tokens+float64(elapsed)/float64(bud.interval), bud.burst)
			b.at = now
		}
		l.order.MoveToFront(el)
		return b
	}
	for len(l.byKey) >= l.max {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.byKey, oldest.Value.(*bucket).key)
	}
	b := &bucket{key: k, tokens: bud.burst, at: now}
	l.byKey[k] = l.order.PushFront(b)
	return b
}

// tracked is how many buckets the limiter holds.
func (l *limiter) tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
}

// loginCharges are what one login attempt is counted against: the account and the address
// together, and the address alone. Without an address (a call from inside the platform) only
// the account counts.
func loginCharges(email, clientIP string) []charge {
	pair := charge{key: "login\x00" + email + "\x00" + clientIP, budget: loginPairBudget}
	if clientIP == "" {
		return []charge{pair}
	}
	return []charge{pair, {key: "login-address\x00" + clientIP, budget: loginAddressBudget}}
}

// signupCharges are what one sign-up is counted against: its client address; none without one.
func signupCharges(clientIP string) []charge {
	if clientIP == "" {
		return nil
	}
	return []charge{{key: "signup\x00" + clientIP, budget: signupBudget}}
}

// resetCharges are what one request for a password reset is counted against: its client address;
// none without one.
func resetCharges(clientIP string) []charge {
	if clientIP == "" {
		return nil
	}
	return []charge{{key: "reset\x00" + clientIP, budget: resetBudget}}
}
