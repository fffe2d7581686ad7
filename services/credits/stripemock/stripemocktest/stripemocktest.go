// Package stripemocktest finds and starts stripe-mock for tests. It is test support, imported
// by _test files only. A test that needs stripe-mock fails when there is none, and never skips
// silently (make test installs it), except in the short run (go test -short, make test-short),
// which starts no server.
package stripemocktest

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/gpumarket/gpumarket/services/credits/stripemock"
)

// find locates stripe-mock as the platform does, from the test process's environment: tests
// read it here, as a binary reads its own in its config file.
func find() (string, error) {
	return stripemock.Find(os.Getenv("STRIPE_MOCK_BIN"),
		stripemock.GoBinDirs(os.Getenv("GOBIN"), os.Getenv("GOPATH"), os.Getenv("HOME")))
}

// Bin is the path of the stripe-mock binary (stripemock.Find).
func Bin(t testing.TB) string {
	t.Helper()
	skipShort(t)
	bin, err := find()
	if err != nil {
		t.Fatalf("stripe-mock: %v", err)
	}
	return bin
}

// Shared is one stripe-mock for a package's tests, started on first use. The package's TestMain
// stops it after m.Run.
type Shared struct {
	once sync.Once
	p    *stripemock.Process
	err  error
}

// URL is the API of the package's stripe-mock, started now if it is not running yet.
func (s *Shared) URL(t testing.TB) string {
	t.Helper()
	skipShort(t)
	s.once.Do(func() {
		bin, err := find()
		if err != nil {
			s.err = err
			return
		}
		s.p, s.err = stripemock.Start(context.Background(), bin, nil)
	})
	if s.err != nil {
		t.Fatalf("stripe-mock: %v (make test installs it)", s.err)
	}
	return s.p.URL
}

// Stop stops the stripe-mock, if it was started.
func (s *Shared) Stop() {
	if s.p != nil {
		s.p.Stop()
	}
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs stripe-mock: left out of the short run; make test runs it")
	}
}

// Start starts a stripe-mock of the test's own and returns its API URL; it stops when the test
// ends.
func Start(t testing.TB) string {
	t.Helper()
	p, err := stripemock.Start(context.Background(), Bin(t), nil)
	if err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	t.Cleanup(p.Stop)
	return p.URL
}
