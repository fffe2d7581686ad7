package stripemock_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gpumarket/gpumarket/services/credits/stripemock"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
)

// Several stripe-mocks started at once each listen where they say, on loopback, and answer there
// until stopped: the port is the one stripe-mock bound, not one picked beforehand that another
// listener could take first.
func TestStartListensWhereItSays(t *testing.T) {
	bin := stripemocktest.Bin(t)
	const n = 3
	procs := make([]*stripemock.Process, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { procs[i], errs[i] = stripemock.Start(context.Background(), bin, nil) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, p := range procs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		defer p.Stop()
		if !strings.HasPrefix(p.URL, "http://127.0.0.1:") || seen[p.URL] {
			t.Fatalf("stripe-mock %d at %q (others at %v)", i, p.URL, seen)
		}
		seen[p.URL] = true
		req, _ := http.NewRequest(http.MethodGet, p.URL+"/v1/balance", nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Stripe-Mock-Version") == "" {
			t.Errorf("stripe-mock %d: %s %v", i, res.Status, res.Header)
		}
	}
	procs[0].Stop()
	if _, err := http.Get(procs[0].URL + "/v1/balance"); err == nil {
		t.Error("a stopped stripe-mock still answers")
	}
}
