package public

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// withSectionBenchmarks is core.WithProviderBenchmarks for the public catalog's tier sections.
func (s *Server) withSectionBenchmarks(c echo.Context, sections []templates.TierSection) error {
	tables := make([][]templates.OfferingRow, len(sections))
	for i, sec := range sections {
		tables[i] = sec.Offerings
	}
	return core.WithProviderBenchmarks(c, s.benchmarks, publicBenchmarkURL, tables...)
}

func publicBenchmarkURL(id string) string { return "/api/offerings/" + id + "/benchmark" }

// apiPublicBenchmark is the benchmark attached to an offering the public catalog lists.
func (s *Server) apiPublicBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	ctx := c.Request().Context()
	o, err := s.catalog.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	prices, err := s.catalog.CurrentModelPrices(ctx, o.Model)
	if err != nil {
		return err
	}
	// Only beside what the public catalog shows: active, and within its model's price in its tier.
	if o.Status != catalog.StatusActive || !o.Priced(prices) {
		return services.Errorf(services.CodeNotFound, "No such offering.")
	}
	attached, err := s.benchmarks.ForOfferings(ctx, []string{o.ID})
	if err != nil {
		return err
	}
	b, ok := attached[o.ID]
	if !ok {
		return services.Errorf(services.CodeNotFound, "Its provider has attached no benchmark to this offering.")
	}
	return c.JSON(http.StatusOK, core.BenchmarkJSONOf(b))
}
