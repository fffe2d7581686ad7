// Package demo seeds the data that `make run` shows a new user: demo providers with one
// offering per GPU configuration and model of the public benchmark, the default price book and
// the prices of the models the tiers' defaults cannot pay for (ModelPrices) from PriceBookStart,
// one demo user per role and two more customers.
// Seeding is idempotent: running it twice changes nothing. The demo's past traffic is seeded
// apart, by services/demo/history.
//
// A demo offering asks what its benchmark run cost per million tokens, split between input
// and output tokens in its tier's input:output price ratio, so that at the benchmark's mix of
// half input and half output tokens the provider earns exactly that cost (Row.Asks). The 32B and
// 70B models, and the 14B model on eight RTX 4090s, cost more than their tier's default price:
// their models have prices of their own in their tier (ModelPrices), so that every configuration
// the benchmark ran is listed. A configuration whose cost is above the price in force for its
// model would be paid more than its customers pay: it is not listed, and where an earlier seed
// listed it, it is paused (see docs/tiers-and-asks.md).
//
// Tables of other packages it reads: accounts (package accounts); offerings (package catalog). It
// writes only its own.
package demo

import (
	"context"
	_ "embed"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// Password is every demo user's password. Demo users exist only where `seed` or `dev` ran.
const Password = "gpumarket-demo"

// Login is a demo user to print for a new user.
type Login struct {
	Email string
	Role  accounts.Role
	What  string
}

// Logins lists the demo users, one per role first.
var Logins = []Login{
	{"developer@example.com", accounts.RoleDeveloper, "buys credits, calls the API"},
	{"provider@example.com", accounts.RoleProvider, "Fjord GPU Co-op: 4x and 8x RTX 4090 rigs"},
	{"finance@example.com", accounts.RoleFinance, "invoices, statements, payouts"},
	{"admin@example.com", accounts.RoleAdmin, "runs the platform, grants roles"},
	{"northwind@example.com", accounts.RoleProvider, "Northwind Compute: H100 PCIe nodes"},
	{"lisboa@example.com", accounts.RoleProvider, "Garage Cluster Lisboa: 1x and 2x RTX 4090 rigs"},
	{"studio@example.com", accounts.RoleDeveloper, "Brightline Studio: a small team on the standard and batch tiers"},
	{"tutor@example.com", accounts.RoleDeveloper, "Juniper Tutoring: a small app whose credit ran out"},
}

var accountNames = map[string]string{
	"developer@example.com": "Acme Labs",
	"provider@example.com":  "Fjord GPU Co-op",
	"finance@example.com":   "gpumarket finance",
	"admin@example.com":     "gpumarket operations",
	"northwind@example.com": "Northwind Compute",
	"lisboa@example.com":    "Garage Cluster Lisboa",
	"studio@example.com":    "Brightline Studio",
	"tutor@example.com":     "Juniper Tutoring",
}

// PriceBookDays is how many days before today the demo's price book starts: as far back as
// the demo's history of traffic can start (services/demo/history: 60 days, or the whole
// previous month, which after a 31st is 61 days), so that every request of it had a price in
// force when it was routed.
const PriceBookDays = 61

// PriceBookStart is when the demo's price book starts, seen at now: midnight UTC PriceBookDays
// days before today.
func PriceBookStart(now time.Time) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day()-PriceBookDays, 0, 0, 0, 0, time.UTC)
}

// ModelPrices are the demo's prices of the models whose benchmark configurations cost more per
// token than their tier's default pays (catalog.DefaultPrices), each in its configurations' tier:
// the 32B models and Nemotron 70B on one or two H100s in standard, the 14B model on eight RTX
// 4090s in standard, the two 70B models on two H100s in batch (their P99 time to first token at
// the benchmark's load is over 20 seconds). Each is a round price in the defaults' 1:2 ratio of
// input to output whose blend, (input + output) / 2, is at least the dearest cost of the model in
// the tier, so that both its asks are within it (Row.Asks).
var ModelPrices = []catalog.Price{
	{Tier: catalog.TierStandard, Model: "Qwen/QwQ-32B-Preview", Input: 300_000, Output: 600_000},                                         // costs $0.378
	{Tier: catalog.TierStandard, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", Input: 300_000, Output: 600_000},                     // $0.361
	{Tier: catalog.TierStandard, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", Input: 210_000, Output: 420_000},                     // $0.300 on 8x RTX 4090
	{Tier: catalog.TierStandard, Model: "neuralmagic/Llama-3.1-Nemotron-70B-Instruct-HF-FP8-dynamic", Input: 500_000, Output: 1_000_000}, // $0.674
	{Tier: catalog.TierBatch, Model: "deepseek-ai/DeepSeek-R1-Distill-Llama-70B", Input: 900_000, Output: 1_800_000},                     // $1.203
	{Tier: catalog.TierBatch, Model: "meta-llama/Meta-Llama-3-70B-Instruct", Input: 900_000, Output: 1_800_000},                          // $1.195
}

// Row is one benchmark run that a demo offering carries.
type Row struct {
	Model      string
	GPU        string
	GPUCount   int
	QPS        float64
	Requests   int64
	TotalTPS   float64
	TTFTP50Ms  float64
	TTFTP99Ms  float64
	USDPerHour float64
	RunFile    string
}

// Cost is the benchmark's hourly price turned into a cost per million tokens, input and output
// together, with the paper's formula, rounded to the micro-dollar.
func (r Row) Cost() money.MicroUSD {
	usd := catalog.USDPerMillionTokens(r.USDPerHour/float64(r.GPUCount), r.GPUCount, r.TotalTPS)
	return money.MicroUSD(math.Round(usd * 1e6))
}

// Tier is the tier the run's measured P99 time to first token earns.
func (r Row) Tier() catalog.Tier { return catalog.TierForP99(r.TTFTP99Ms) }

// Asks splits the run's cost C between input and output tokens in the ratio of the tier's
// prices p: the input ask is 2C x input / (input + output), rounded to the nearest micro-dollar,
// and the output ask the rest of 2C, so that half a million tokens of each earn exactly C. When
// C is at most the tier's blended price, (input + output) / 2, both asks are within p.
func (r Row) Asks(p catalog.Price) (input, output money.MicroUSD) {
	twice, sum := 2*r.Cost(), p.Input+p.Output
	if sum <= 0 {
		return r.Cost(), r.Cost()
	}
	input = (twice*p.Input + sum/2) / sum
	return input, twice - input
}

// SeedKey names the run's offering among the seeded ones.
func (r Row) SeedKey() string {
	return fmt.Sprintf("benchmark:%s:%dx%s", r.Model, r.GPUCount, r.GPU)
}

// owner says which demo provider lists the rig: H100 nodes in the US, small 4090 rigs in the
// EU, large 4090 rigs in Norway.
func (r Row) owner() (email, region string) {
	switch {
	case strings.HasPrefix(r.GPU, "h100"):
		return "northwind@example.com", "us"
	case r.GPUCount <= 2:
		return "lisboa@example.com", "eu"
	default:
		return "provider@example.com", "no"
	}
}

// statedPUE is the PUE a demo provider states for its rigs: Northwind's data centre publishes
// one; the home rigs take their site's default (docs/methodology.md).
func statedPUE(email string) *float64 {
	if email == "northwind@example.com" {
		pue := NorthwindPUE
		return &pue
	}
	return nil
}

// NorthwindPUE is the PUE Northwind Compute states for its data centre.
const NorthwindPUE = 1.15

//go:embed benchmark_offerings.csv
var benchmarkCSV string

// Rows parses the embedded benchmark figures.
func Rows() ([]Row, error) {
	cr := csv.NewReader(strings.NewReader(benchmarkCSV))
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("demo: benchmark_offerings.csv: %w", err)
	}
	var out []Row
	for i, rec := range recs[1:] {
		var r Row
		var errs []error
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			errs = append(errs, err)
			return v
		}
		r.Model, r.GPU, r.RunFile = rec[0], rec[1], rec[9]
		r.GPUCount = int(num(rec[2]))
		r.QPS = num(rec[3])
		r.Requests = int64(num(rec[4]))
		r.TotalTPS = num(rec[5])
		r.TTFTP50Ms = num(rec[6])
		r.TTFTP99Ms = num(rec[7])
		r.USDPerHour = num(rec[8])
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("demo: benchmark_offerings.csv row %d: %w", i+2, err)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Seed creates what is missing of the demo data and changes nothing that exists.
func Seed(ctx context.Context, acc *accounts.Service, cat *catalog.Service, now time.Time) (err error) {
	defer services.Wrap(&err, "demo.Seed")
	users := map[string]accounts.User{}
	for _, l := range Logins {
		u, err := acc.EnsureUser(ctx, l.Email, Password, l.Role, accountNames[l.Email])
		if err != nil {
			return err
		}
		users[l.Email] = u
	}
	for _, l := range Logins {
		if u := users[l.Email]; u.Role != l.Role {
			return fmt.Errorf("%s exists with role %s, not %s", l.Email, u.Role, l.Role)
		}
	}
	// Prices take effect from PriceBookStart: on a platform seeded earlier, whose book starts
	// later, the defaults are added for the days before it, and nothing else changes. A model's
	// price missing from a book that started earlier takes effect now, never before
	// (catalog.Service.EnsurePrices).
	if err := cat.EnsureDefaultPrices(ctx, PriceBookStart(now)); err != nil {
		return err
	}
	if err := cat.EnsurePrices(ctx, ModelPrices, PriceBookStart(now)); err != nil {
		return err
	}
	book, err := cat.PriceBook(ctx)
	if err != nil {
		return err
	}
	rows, err := Rows()
	if err != nil {
		return err
	}
	for _, r := range rows {
		p, ok := book.At(r.Tier(), r.Model, now)
		if !ok {
			return fmt.Errorf("no %s price in force at %s", r.Tier(), now.Format(time.RFC3339))
		}
		askIn, askOut := r.Asks(p)
		if !p.Covers(askIn, askOut) {
			if _, err := cat.PauseSeeded(ctx, r.SeedKey()); err != nil {
				return err
			}
			continue
		}
		email, region := r.owner()
		p50, p99, tps := r.TTFTP50Ms, r.TTFTP99Ms, r.TotalTPS
		in := catalog.SeedInput{
			Listing: catalog.ListingInput{
				GPU: r.GPU, GPUCount: r.GPUCount, Region: region, Model: r.Model, AskInput: askIn, AskOutput: askOut,
				PUE:              statedPUE(email),
				ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps,
			},
			// The benchmark run is what the provider claims; what the platform measures comes from the rig's
			// traffic (the demo's history, then live requests), never copied from the claim.
			Source: fmt.Sprintf("IOG benchmark (AIBC 2025), %s, at %g requests/s", r.RunFile, r.QPS),
		}
		if _, err := cat.EnsureSeeded(ctx, users[email].AccountID, r.SeedKey(), in); err != nil {
			return err
		}
	}
	return nil
}
