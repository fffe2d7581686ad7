package web

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/templates"
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
				sec.Offerings = append(sec.Offerings, offeringRow(o))
			}
		}
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
	return s.render(c, http.StatusOK, templates.Home(templates.HomePage{Page: s.page(c, "Home"), Sections: tierSections(offerings, book, s.now(), "")}))
}

func (s *Server) catalogPage(c echo.Context) error {
	ctx := c.Request().Context()
	in, ferr := listInput(c)
	filters := templates.CatalogFilters{
		Tier: c.QueryParam("tier"), Model: in.Model, Region: in.Region, MaxPrice: c.QueryParam("max_price"),
		MaxP99: c.QueryParam("max_p99_ms"), Sort: c.QueryParam("sort"), Regions: regionOptions(),
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
	sections := tierSections(offerings, book, s.now(), in.Tier)
	if err := s.withSectionBenchmarks(c, sections); err != nil {
		return err
	}
	return s.render(c, status, templates.Catalog(templates.CatalogPage{
		Page: s.page(c, "Catalog"), Filters: filters, Sections: s.withRecords(sections), Count: len(offerings),
	}))
}

// offeringJSON is an offering as the API shows it, with the figures the catalog shows.
type offeringJSON struct {
	catalog.Offering
	TTFTP99Ms    *float64           `json:"ttft_p99_ms"`
	TokensPerSec *float64           `json:"tokens_per_second"`
	FiguresBasis string             `json:"figures_basis"`
	Footprint    *catalog.Footprint `json:"footprint_estimate,omitempty"`
	// TierPriceIn and TierPriceOut are what the offering's customers pay: the price in force for its model in
	// its tier, the model's own (ModelPrice) where it has one, else the tier's default.
	TierPriceIn  money.MicroUSD `json:"tier_input_usd_per_mtok"`
	TierPriceOut money.MicroUSD `json:"tier_output_usd_per_mtok"`
	ModelPrice   bool           `json:"model_price,omitempty"`
	BlendedAsk   money.MicroUSD `json:"blended_ask_usd_per_mtok"` // what the catalog sorts and caps by
	// PUE is the one the rig's figures use: stated by its provider, else its site's default.
	PUE       float64 `json:"pue"`
	PUEStated bool    `json:"pue_stated"`
	// For the offering's provider: why it is not routed at the prices in force, and how its rig's own figures
	// disagree with the gateway's; empty when neither.
	NotRoutedBecause string `json:"not_routed_because,omitempty"`
	ReportDivergence string `json:"report_divergence,omitempty"`
	// Reliability is the offering's reliability record, in the public catalog (reliability.go).
	Reliability *reliability.Record `json:"reliability,omitempty"`
	// For the offering's provider: where its rig stands with the platform and why ("Pending: 2 of 3 probes
	// passed"; docs/listing-states.md).
	RigStateReason string `json:"rig_state_reason,omitempty"`
	// For the offering's provider: the APIs besides chat completions its rig's engine serves natively, as its
	// agent last said ("messages", "responses"), and how the gateway serves the two on it.
	NativeAPIs []string `json:"native_apis,omitempty"`
	APIsServed string   `json:"apis_served,omitempty"`
}

// toJSON shows the offering at prices, the prices in force for its model (catalog.PriceBook.ForModel).
func toJSON(o catalog.Offering, prices map[catalog.Tier]catalog.Price, owner bool) offeringJSON {
	j := offeringJSON{Offering: o, TTFTP99Ms: o.TTFTP99Ms(), TokensPerSec: o.TokensPerSec(), FiguresBasis: o.FiguresBasis(),
		BlendedAsk: o.BlendedAsk()}
	j.PUE, j.PUEStated = carbon.PUE(o.Site, o.StatedPUE)
	if f, ok := o.Footprint(); ok {
		j.Footprint = &f
	}
	if p, ok := prices[o.Tier]; ok {
		j.TierPriceIn, j.TierPriceOut, j.ModelPrice = p.Input, p.Output, p.Model != ""
	}
	if owner {
		if o.Status == catalog.StatusActive {
			j.NotRoutedBecause = o.NotRoutedBecause(prices)
		}
		j.ReportDivergence = o.ReportDivergence()
	}
	return j
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
	now := s.now()
	out := make([]offeringJSON, 0, len(offerings))
	for _, o := range offerings {
		j := toJSON(o, book.ForModel(o.Model, now), false)
		j.Reliability = s.publishedRecord(o.ID)
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
	j := toJSON(o, prices, false)
	j.Reliability = s.publishedRecord(o.ID)
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
	for _, p := range pricesInTierOrder(book, s.now()) {
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
