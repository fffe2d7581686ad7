package core

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
)

// The benchmark a provider attaches to a listing (docs/provider-benchmarks.md), as the provider's pages
// and the public catalog both show it.

// BenchmarksUnavailable answers where no benchmark store is wired.
func BenchmarksUnavailable() error {
	return services.Errorf(services.CodeUnavailable, "Benchmarks are not available on this server.")
}

// BenchmarkView is what the pages show of an attached benchmark.
func BenchmarkView(b benchmarks.Benchmark, rawURL string) *templates.ProviderBenchmark {
	at := "all at once"
	if b.Rate > 0 {
		at = "at " + strconv.FormatFloat(b.Rate, 'f', -1, 64) + " requests/s"
	}
	v := &templates.ProviderBenchmark{
		Figures: fmt.Sprintf("p50 TTFT %s, %s tokens/s %s over %s", FormatMs(b.TTFTP50Ms),
			strconv.FormatFloat(b.TotalTPS, 'f', 0, 64), at, money.Counted(int64(b.Completed), "request", "requests")),
		Date: b.StartedAt.UTC().Format("2 Jan 2006"), RawURL: rawURL,
	}
	if !b.ThroughGateway {
		v.Elsewhere = b.BaseURL
		if u, err := url.Parse(b.BaseURL); err == nil && u.Host != "" {
			v.Elsewhere = u.Host
		}
	}
	return v
}

// WithProviderBenchmarks puts on each row of the tables the benchmark its provider attached, if
// any, in one query. rawURL is where a row's result can be read.
func WithProviderBenchmarks(c echo.Context, bench *benchmarks.Service, rawURL func(id string) string, tables ...[]templates.OfferingRow) error {
	if bench == nil {
		return nil
	}
	var ids []string
	for _, rows := range tables {
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	attached, err := bench.ForOfferings(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	for _, rows := range tables {
		for i, r := range rows {
			if b, ok := attached[r.ID]; ok {
				rows[i].Benchmark = BenchmarkView(b, rawURL(r.ID))
			}
		}
	}
	return nil
}

// BenchmarkJSON is an attached benchmark as the API shows it: its figures, its label, and the
// result as it was attached.
type BenchmarkJSON struct {
	benchmarks.Benchmark
	Label  string          `json:"label"`
	Result json.RawMessage `json:"result"`
}

// BenchmarkLabel says whose figures these are, wherever the API shows them.
const BenchmarkLabel = "Benchmarked by the provider: the provider's own claim, not measured by the platform."

// BenchmarkJSONOf is the benchmark as the API shows it.
func BenchmarkJSONOf(b benchmarks.Benchmark) BenchmarkJSON {
	return BenchmarkJSON{Benchmark: b, Label: BenchmarkLabel, Result: json.RawMessage(b.Result)}
}
