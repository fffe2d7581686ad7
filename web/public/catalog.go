package public

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// listInput reads the catalog's filters from the query string.
func listInput(c echo.Context) (catalog.ListInput, error) {
	in := catalog.ListInput{
		Tier: catalog.Tier(c.QueryParam("tier")), Model: c.QueryParam("model"), Region: c.QueryParam("region"),
		Sort: catalog.Sort(c.QueryParam("sort")),
	}
	fe := services.FieldErrors{}
	if v := strings.TrimSpace(c.QueryParam("max_price")); v != "" {
		m, err := money.ParseMicroUSD(v)
		if err != nil || m == 0 {
			fe.Add("max_price", "Enter dollars per million tokens above 0, like 0.15: it caps the ask at half input, half output tokens.")
		}
		in.MaxAsk = m
	}
	if v := strings.TrimSpace(c.QueryParam("max_p99_ms")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			fe.Add("max_p99_ms", "Enter milliseconds, like 500.")
		}
		in.MaxP99Ms = f
	}
	if err := in.Validate(); err != nil {
		if ae, ok := err.(*services.Error); ok {
			for k, v := range ae.Fields {
				fe.Add(k, v)
			}
		}
	}
	return in, fe.Err()
}

// tierSections groups offerings by tier, each with the tier's default price in force at now and the
// models' own prices in it.
func tierSections(offerings []catalog.Offering, book catalog.PriceBook, now time.Time, only catalog.Tier) []templates.TierSection {
	var out []templates.TierSection
	models := book.ModelsAt(now)
	for _, t := range catalog.Tiers {
		if only != "" && t != only {
			continue
		}
		sec := templates.TierSection{Tier: string(t), Promise: t.Promise(), InputPrice: "—", OutputPrice: "—"}
		if p, ok := book.At(t, "", now); ok {
			sec.InputPrice, sec.OutputPrice = p.Input.String(), p.Output.String()
		}
		for _, m := range slices.Sorted(maps.Keys(models[t])) {
			p := models[t][m]
			sec.ModelPrices = append(sec.ModelPrices, templates.ModelPrice{Model: m, InputPrice: p.Input.String(), OutputPrice: p.Output.String()})
		}
		for _, o := range offerings {
			if o.Tier == t {
				sec.Offerings = append(sec.Offerings, core.OfferingRow(o))
			}
		}
		sec.Count = money.Counted(int64(len(sec.Offerings)), "offering", "offerings")
		out = append(out, sec)
	}
	return out
}

func (s *Server) homePage(c echo.Context) error {
	ctx := c.Request().Context()
	offerings, err := s.catalog.List(ctx, catalog.ListInput{})
	if err != nil {
		return err
	}
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	return s.Render(c, http.StatusOK, templates.Home(templates.HomePage{Page: s.Page(c, "Home"), Sections: tierSections(offerings, book, s.Now(), "")}))
}

func (s *Server) catalogPage(c echo.Context) error {
	ctx := c.Request().Context()
	in, ferr := listInput(c)
	filters := templates.CatalogFilters{
		Tier: c.QueryParam("tier"), Model: in.Model, Region: in.Region, MaxPrice: c.QueryParam("max_price"),
		MaxP99: c.QueryParam("max_p99_ms"), Sort: c.QueryParam("sort"), Regions: core.RegionOptions(),
	}
	status := http.StatusOK
	if ferr != nil {
		// Show the catalog unfiltered by the bad values, with the problems beside them.
		filters.Errors = ferr.(*services.Error).Fields
		status = http.StatusUnprocessableEntity
		in = catalog.ListInput{}
	}
	offerings, err := s.catalog.List(ctx, in)
	if err != nil {
		return err
	}
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	models, err := s.catalog.Models(ctx)
	if err != nil {
		return err
	}
	for _, m := range models {
		filters.Models = append(filters.Models, templates.Option{Value: m, Label: m})
	}
	sections := tierSections(offerings, book, s.Now(), in.Tier)
	if err := s.withSectionBenchmarks(c, sections); err != nil {
		return err
	}
	return s.Render(c, status, templates.Catalog(templates.CatalogPage{
		Page: s.Page(c, "Catalog"), Filters: filters, Sections: s.WithRecords(sections), Count: len(offerings),
	}))
}

func (s *Server) apiOfferings(c echo.Context) error {
	ctx := c.Request().Context()
	in, err := listInput(c)
	if err != nil {
		return err
	}
	offerings, err := s.catalog.List(ctx, in)
	if err != nil {
		return err
	}
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	out := make([]core.OfferingJSON, 0, len(offerings))
	for _, o := range offerings {
		j := core.OfferingToJSON(o, book.ForModel(o.Model, now), false)
		j.Reliability = s.PublishedRecord(o.ID)
		out = append(out, j)
	}
	return c.JSON(http.StatusOK, map[string]any{"offerings": out, "count": len(out)})
}

func (s *Server) apiOffering(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.catalog.Get(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	prices, err := s.catalog.CurrentModelPrices(ctx, o.Model)
	if err != nil {
		return err
	}
	// The public catalog shows only what it lists: active, its rig qualified, and within its model's price in
	// its tier.
	if o.Status != catalog.StatusActive || o.RigState != catalog.RigActive || !o.Priced(prices) {
		return services.Errorf(services.CodeNotFound, "No such offering.")
	}
	j := core.OfferingToJSON(o, prices, false)
	j.Reliability = s.PublishedRecord(o.ID)
	return c.JSON(http.StatusOK, j)
}

// apiPrices lists the prices in force: under "prices" each tier's default, as before there were prices per
// model, and under "model_prices" the models' own prices, by tier and model.
func (s *Server) apiPrices(c echo.Context) error {
	book, err := s.catalog.PriceBook(c.Request().Context())
	if err != nil {
		return err
	}
	defaults, models := []catalog.Price{}, []catalog.Price{}
	for _, p := range core.PricesInTierOrder(book, s.Now()) {
		if p.Model == "" {
			defaults = append(defaults, p)
		} else {
			models = append(models, p)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"prices": defaults, "model_prices": models})
}

func (s *Server) apiReference(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"gpus": catalog.GPUs, "regions": catalog.Regions})
}
