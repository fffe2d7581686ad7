package admission_test

import (
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
)

var testNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// shop is what an admission test works with: a fresh database, one buying organisation, and
// the credits service that grants it the balance admission reads.
type shop struct {
	credits *credits.Credits
	pool    *pgxpool.Pool
	clock   *clock
	org     string
}

func setupShop(t *testing.T) shop {
	t.Helper()
	pool := dbtest.New(t)
	clk := &clock{now: testNow}
	return shop{
		credits: credits.NewCredits(pool, ledger.NewLedger(pool, clk.Now), nil, clk.Now),
		pool:    pool,
		clock:   clk,
		org:     newOrg(t, pool, "Acme Labs"),
	}
}

func newOrg(t testing.TB, pool *pgxpool.Pool, name string) string {
	t.Helper()
	return fixtures.Account(t, pool, name, fixtures.AccountCreatedAt(testNow))
}

func newUser(t testing.TB, pool *pgxpool.Pool, org, email string) string {
	t.Helper()
	return fixtures.User(t, pool, org, email, "developer", fixtures.UserCreatedAt(testNow))
}

// newAdmission is admission.NewAdmission reading the meter's usage and the budgets as the platform wires it.
func newAdmission(cfg admission.AdmissionConfig) *admission.Admission {
	cfg.Usage, cfg.Limits = metering.GatewayReads{}, budgets.AdmissionLimits{}
	return admission.NewAdmission(cfg)
}
