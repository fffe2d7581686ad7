package accounts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
)

func randomEmail() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "@random.example.com"
}

func login(s *Service, email, password, ip string) services.Code {
	_, err := s.Login(context.Background(), LoginInput{Email: email, Password: password, ClientIP: ip})
	return services.ErrorCode(err)
}

// The attack: bad logins for random emails from one address (an office's proxy, or someone
// behind it). Five, then fifty more: the admin still logs in from that address and from any
// other. Past the address's own budget of 100 failures that address is refused, and only it.
func TestBadLoginsForRandomEmailsLockOutNobodyElse(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	if _, err := s.EnsureUser(ctx, "root@example.com", "the admin's password", RoleAdmin, "ops"); err != nil {
		t.Fatal(err)
	}
	const proxy, elsewhere = "203.0.113.7", "198.51.100.9"
	failures := 0
	for _, n := range []int{5, 50} {
		for range n {
			if code := login(s, randomEmail(), "guess", proxy); code != services.CodeUnauthorized {
				t.Fatalf("bad login %d from %s: %s, want unauthorized", failures+1, proxy, code)
			}
			failures++
		}
		if code := login(s, "root@example.com", "the admin's password", proxy); code != "" {
			t.Fatalf("after %d bad logins from %s the admin logging in from it got %s", failures, proxy, code)
		}
		if code := login(s, "root@example.com", "the admin's password", elsewhere); code != "" {
			t.Fatalf("after %d bad logins from %s the admin logging in from %s got %s", failures, proxy, elsewhere, code)
		}
	}

	// The address's budget: 100 failures at once. The admin's logins above spent nothing.
	for failures < loginAddressBurst {
		if code := login(s, randomEmail(), "guess", proxy); code != services.CodeUnauthorized {
			t.Fatalf("bad login %d from %s: %s, want unauthorized", failures+1, proxy, code)
		}
		failures++
	}
	if code := login(s, randomEmail(), "guess", proxy); code != services.CodeRateLimited {
		t.Fatalf("bad login %d from %s: %s, want rate_limited", failures+1, proxy, code)
	}
	if code := login(s, "root@example.com", "the admin's password", proxy); code != services.CodeRateLimited {
		t.Fatalf("with %s's budget spent, the admin logging in from it got %q, want rate_limited", proxy, code)
	}
	if code := login(s, "root@example.com", "the admin's password", elsewhere); code != "" {
		t.Fatalf("with %s's budget spent, the admin logging in from %s got %s", proxy, elsewhere, code)
	}
	// One attempt comes back every 3 s.
	c.t = c.t.Add(loginAddressInterval)
	if code := login(s, "root@example.com", "the admin's password", proxy); code != "" {
		t.Fatalf("%v later the admin logging in from %s got %s", loginAddressInterval, proxy, code)
	}
}

// Guessing one account's password from one address: five failures, then that account is
// refused at that address, even with the right password, and nowhere else; a success spends
// nothing.
func TestBadLoginsForOneAccountLockOnlyThatAccountAtThatAddress(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "a@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SignUp(ctx, SignUpInput{Email: "b@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if code := login(s, "a@example.com", "long enough!", "10.0.0.1"); code != "" {
			t.Fatalf("successful login %d: %s; a success must spend nothing", i+1, code)
		}
	}
	for i := range loginPairBurst {
		if code := login(s, "A@example.com", "wrong", "10.0.0.1"); code != services.CodeUnauthorized {
			t.Fatalf("wrong password %d: %s", i+1, code)
		}
	}
	if code := login(s, "a@example.com", "long enough!", "10.0.0.1"); code != services.CodeRateLimited {
		t.Fatalf("the right password after %d failures at the same address: %q, want rate_limited", loginPairBurst, code)
	}
	if code := login(s, "a@example.com", "long enough!", "10.0.0.2"); code != "" {
		t.Fatalf("the right password from another address: %s", code)
	}
	if code := login(s, "b@example.com", "long enough!", "10.0.0.1"); code != "" {
		t.Fatalf("another account from the same address: %s", code)
	}
	c.t = c.t.Add(loginPairInterval)
	if code := login(s, "a@example.com", "long enough!", "10.0.0.1"); code != "" {
		t.Fatalf("%v later: %s", loginPairInterval, code)
	}
}

// A flood of bad logins for random emails from random addresses: the limiter keeps at most its
// cap of buckets.
func TestLoginLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	s, err := NewService(dbtest.New(t), Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: PasswordHasher{MemoryKiB: 8, Time: 1, Threads: 1}, TrackedKeys: 500})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2_000 {
		ip := fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
		if code := login(s, randomEmail(), "guess", ip); code != services.CodeUnauthorized {
			t.Fatalf("bad login %d: %s", i+1, code)
		}
	}
	if n := s.limiter.tracked(); n != 500 {
		t.Fatalf("after 2,000 bad logins (4,000 buckets' worth) the limiter tracks %d buckets, want its cap of 500", n)
	}

	// The default cap, against 150,000 distinct keys.
	l := newLimiter(time.Now, 0)
	for i := range 150_000 {
		l.take(loginCharges(randomEmail(), fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256))...)
	}
	if n := l.tracked(); n != DefaultTrackedKeys {
		t.Fatalf("after 150,000 random keys the limiter tracks %d buckets, want its cap of %d", n, DefaultTrackedKeys)
	}
}

func TestLimiterBuckets(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := newLimiter(c.now, 10)
	small := budget{burst: 2, interval: 10 * time.Second}
	big := budget{burst: 3, interval: time.Second}
	both := []charge{{"a", small}, {"b", big}}
	for i, want := range []bool{true, true, false} {
		if got := l.take(both...); got != want {
			t.Fatalf("take %d: %v, want %v", i+1, got, want)
		}
	}
	// The refused take spent nothing: "b" has one token left.
	if !l.take(charge{"b", big}) || l.take(charge{"b", big}) {
		t.Fatal(`"b" should have had exactly one token left after a refused take`)
	}
	l.give(charge{"a", small})
	if !l.take(charge{"a", small}) || l.take(charge{"a", small}) {
		t.Fatal(`give should have returned exactly one token to "a"`)
	}
	c.t = c.t.Add(5 * time.Second) // half a token for "a"
	if l.take(charge{"a", small}) {
		t.Fatal(`"a" took a token after half its interval`)
	}
	c.t = c.t.Add(5 * time.Second)
	if !l.take(charge{"a", small}) {
		t.Fatal(`"a" had no token after its interval`)
	}
	// Giving never fills past the burst.
	for range 5 {
		l.give(charge{"c", small})
	}
	for i, want := range []bool{true, true, false} {
		if got := l.take(charge{"c", small}); got != want {
			t.Fatalf(`take %d of "c": %v, want %v`, i+1, got, want)
		}
	}
}

// Sign-ups: ten from one address at once, then one every two minutes; another address is not
// affected.
func TestSignUpsAreRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	signup := func(ip string) services.Code {
		_, err := s.SignUp(ctx, SignUpInput{Email: randomEmail(), Password: "long enough!", Role: RoleDeveloper, ClientIP: ip})
		return services.ErrorCode(err)
	}
	for i := range signupBurst {
		if code := signup("192.0.2.1"); code != "" {
			t.Fatalf("sign-up %d: %s", i+1, code)
		}
	}
	if code := signup("192.0.2.1"); code != services.CodeRateLimited {
		t.Fatalf("sign-up %d from one address: %q, want rate_limited", signupBurst+1, code)
	}
	if code := signup("192.0.2.2"); code != "" {
		t.Fatalf("a sign-up from another address: %s", code)
	}
	var users int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&users); err != nil || users != signupBurst+1 {
		t.Fatalf("%d users stored (%v), want %d", users, err, signupBurst+1)
	}
	c.t = c.t.Add(signupInterval)
	if code := signup("192.0.2.1"); code != "" {
		t.Fatalf("a sign-up %v later: %s", signupInterval, code)
	}
}

// With every hashing slot taken, a login or a sign-up waits its short bound and is told to
// retry; it spends none of its budget and stores nothing. Once a slot is free it goes through.
func TestPasswordHashingIsBounded(t *testing.T) {
	t.Parallel()
	const wait = 100 * time.Millisecond
	s, err := NewService(dbtest.New(t), Config{SessionKey: []byte(strings.Repeat("k", 32)),
		Hasher: PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}, HashSlots: 2, HashWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "a@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	s.hashes.slots <- struct{}{}
	s.hashes.slots <- struct{}{}
	for i := range loginPairBurst + 1 {
		start := time.Now()
		code := login(s, "a@example.com", "long enough!", "10.0.0.1")
		took := time.Since(start)
		if code != services.CodeUnavailable || took < wait || took > wait+time.Second {
			t.Fatalf("login %d with every slot taken: %q after %v, want unavailable after about %v", i+1, code, took, wait)
		}
	}
	_, err = s.SignUp(ctx, SignUpInput{Email: "b@example.com", Password: "long enough!", Role: RoleDeveloper, ClientIP: "10.0.0.1"})
	if services.ErrorCode(err) != services.CodeUnavailable || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("sign-up with every slot taken: %v, want unavailable with a retry", err)
	}
	if _, err := s.UserByEmail(ctx, "b@example.com"); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("the refused sign-up stored a user: %v", err)
	}
	<-s.hashes.slots
	// The busy logins spent nothing: five wrong passwords still get their answer.
	for i := range loginPairBurst {
		if code := login(s, "a@example.com", "wrong", "10.0.0.1"); code != services.CodeUnauthorized {
			t.Fatalf("wrong password %d after the busy logins: %s", i+1, code)
		}
	}
	if code := login(s, "a@example.com", "long enough!", "10.0.0.2"); code != "" {
		t.Fatalf("login with a slot free: %s", code)
	}
}

// A flood of logins, with real argon2id parameters, on two slots: each ends as a login or a
// prompt "busy, retry" within the wait and one hash, never queued without end.
func TestLoginFloodGetsBusyRatherThanQueueing(t *testing.T) {
	t.Parallel()
	const wait = 50 * time.Millisecond
	s, err := NewService(dbtest.New(t), Config{SessionKey: []byte(strings.Repeat("k", 32)), HashSlots: 2, HashWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "a@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var (
		mu      sync.Mutex
		ok      int
		busy    int
		slowest time.Duration
		wg      sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			code := login(s, "a@example.com", "long enough!", fmt.Sprintf("10.1.0.%d", i))
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case "":
				ok++
			case services.CodeUnavailable:
				busy++
				slowest = max(slowest, took)
			default:
				t.Errorf("login %d: %s", i, code)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d logins at once on 2 slots: %d logged in, %d told to retry (the slowest after %v)", n, ok, busy, slowest)
	if ok+busy != n || ok < 2 || busy == 0 {
		t.Fatalf("%d logged in and %d busy of %d: want at least 2 in, some busy, and nothing else", ok, busy, n)
	}
	if slowest > wait+2*time.Second {
		t.Fatalf("a busy login took %v, want about the wait of %v", slowest, wait)
	}
}
