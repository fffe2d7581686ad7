package web_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/web"
)

// behindProxy trusts the test's own connections (from loopback) as a proxy's.
func behindProxy(cfg *web.Config, _ *pgxpool.Pool) {
	for _, cidr := range []string{"127.0.0.0/8", "::1/128"} {
		_, n, _ := net.ParseCIDR(cidr)
		cfg.TrustedProxies = append(cfg.TrustedProxies, n)
	}
}

// postJSONFrom posts a JSON body as if from the client address (in X-Forwarded-For) and
// returns the status and the decoded error, if any.
func postJSONFrom(t *testing.T, e *env, path, clientIP string, body any) (int, apiErrorJSON) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if clientIP != "" {
		req.Header.Set("X-Forwarded-For", clientIP)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var apiErr apiErrorJSON
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &apiErr)
	return res.StatusCode, apiErr
}

func randomEmail() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "@random.example.com"
}

// The attack, through the platform's own proxy: five and then fifty bad logins for random
// emails from one client address, then the admin logs in from that address and from another.
// Both get in.
func TestBadLoginsFromOneAddressBehindTheProxyLockOutNobody(t *testing.T) {
	t.Parallel()
	e := setupWith(t, behindProxy)
	const attacker, elsewhere = "203.0.113.7", "198.51.100.9"
	admin := map[string]string{"email": "admin@example.com", "password": demo.Password}
	bad := 0
	for _, n := range []int{5, 50} {
		for range n {
			if st, _ := postJSONFrom(t, e, "/api/auth/login", attacker, map[string]string{"email": randomEmail(), "password": "guess"}); st != http.StatusUnauthorized {
				t.Fatalf("bad login %d from %s: %d, want 401", bad+1, attacker, st)
			}
			bad++
		}
		for _, from := range []string{attacker, elsewhere} {
			if st, body := postJSONFrom(t, e, "/api/auth/login", from, admin); st != http.StatusOK {
				t.Fatalf("after %d bad logins from %s, the admin logging in from %s: %d %+v, want 200", bad, attacker, from, st, body)
			}
		}
	}
}

// Without a trusted proxy, X-Forwarded-For is the client's to write and means nothing: a
// hundred bad logins, each claiming another address, spend the one address they come from.
func TestForgedForwardedForDoesNotResetTheLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 100 {
		forged := fmt.Sprintf("198.18.%d.%d", i/256, i%256)
		if st, _ := postJSONFrom(t, e, "/api/auth/login", forged, map[string]string{"email": randomEmail(), "password": "guess"}); st != http.StatusUnauthorized {
			t.Fatalf("bad login %d: %d, want 401", i+1, st)
		}
	}
	st, body := postJSONFrom(t, e, "/api/auth/login", "198.18.200.1", map[string]string{"email": randomEmail(), "password": "guess"})
	if st != http.StatusTooManyRequests || body.Error.Code != "rate_limited" {
		t.Fatalf("bad login 101 with yet another forged address: %d %+v, want 429", st, body)
	}
}

// Sign-ups are limited per client address: ten, then 429 with what to do; another address
// still signs up.
func TestSignUpsAreRateLimitedPerClientAddress(t *testing.T) {
	t.Parallel()
	e := setupWith(t, behindProxy)
	signup := func(from string) (int, apiErrorJSON) {
		return postJSONFrom(t, e, "/api/auth/signup", from, map[string]string{"email": randomEmail(), "password": "a long password",
			"role": "developer"})
	}
	for i := range 10 {
		if st, body := signup("192.0.2.1"); st != http.StatusCreated {
			t.Fatalf("sign-up %d: %d %+v", i+1, st, body)
		}
	}
	if st, body := signup("192.0.2.1"); st != http.StatusTooManyRequests || !strings.Contains(body.Error.Message, "Wait a few minutes") {
		t.Fatalf("sign-up 11 from one address: %d %+v, want 429", st, body)
	}
	if st, _ := signup("192.0.2.2"); st != http.StatusCreated {
		t.Fatalf("a sign-up from another address: %d", st)
	}
	// The page form says the same, beside the form.
	b := browserClient(t)
	token := csrfFromPage(t, b, e.srv.URL+"/signup")
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signup", strings.NewReader(url.Values{"_csrf": {token},
		"email": {randomEmail()}, "password": {"a long password"}, "role": {"developer"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-For", "192.0.2.1")
	res, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(doc.Find(testID("form-error")).Text(), "Too many sign-ups") {
		t.Fatalf("the sign-up form from the spent address: %d %q", res.StatusCode, doc.Find(testID("form-error")).Text())
	}
}

// A flood of logins on one hashing slot: those that find it taken are told, with 503, to
// retry, rather than queue.
func TestLoginFloodIsToldToRetry(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		behindProxy(cfg, pool) // each login from an address of its own: only the hashing slot limits them
		acc, err := accounts.NewService(pool, accounts.Config{SessionKey: []byte(strings.Repeat("k", 32)),
			Hasher: accounts.PasswordHasher{MemoryKiB: 4 * 1024, Time: 1, Threads: 1}, HashSlots: 1, HashWait: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Accounts = acc
	})
	if _, err := e.accounts.SignUp(t.Context(), accounts.SignUpInput{Email: "flood@example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	const n = 30
	var mu sync.Mutex
	statuses := map[int]int{}
	var busy apiErrorJSON
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := postJSONFrom(t, e, "/api/auth/login", fmt.Sprintf("10.9.0.%d", i),
				map[string]string{"email": "flood@example.com", "password": demo.Password})
			mu.Lock()
			defer mu.Unlock()
			statuses[st]++
			if st == http.StatusServiceUnavailable {
				busy = body
			}
		}()
	}
	wg.Wait()
	t.Logf("%d logins at once on one hashing slot: %v", n, statuses)
	if statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != n || statuses[http.StatusOK] == 0 ||
		statuses[http.StatusServiceUnavailable] == 0 {
		t.Fatalf("statuses %v: want only 200s and 503s, some of each", statuses)
	}
	if busy.Error.Code != "unavailable" || !strings.Contains(busy.Error.Message, "retry") {
		t.Fatalf("the busy answer: %+v, want code unavailable and a retry", busy)
	}
}
