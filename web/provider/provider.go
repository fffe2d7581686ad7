package provider

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

var listingFields = []string{"gpu", "gpu_count", "region", "model", catalog.FieldAskInput, catalog.FieldAskOutput,
	"claimed_ttft_p50_ms", "claimed_ttft_p99_ms", "claimed_tokens_per_second", "site", "pue"}

// listingInput reads a listing from text values (a form, or a JSON body's values) and reports
// every problem at once: what does not parse, and what breaks the catalog's rules.
func listingInput(get func(string) string) (catalog.ListingInput, error) {
	fe := services.FieldErrors{}
	in := catalog.ListingInput{GPU: get("gpu"), Region: get("region"), Model: get("model")}
	if v := strings.TrimSpace(get("gpu_count")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fe.Add("gpu_count", "A rig has 1 to 8 GPUs.")
		}
		in.GPUCount = n
	}
	ask := func(field, kind, example string) money.MicroUSD {
		v := strings.TrimSpace(get(field))
		if v == "" {
			return 0
		}
		m, err := money.ParseMicroUSD(v)
		if err != nil {
			fe.Add(field, "Enter dollars per million "+kind+" tokens, like "+example+".")
		}
		return m
	}
	in.AskInput = ask(catalog.FieldAskInput, "input", "0.10")
	in.AskOutput = ask(catalog.FieldAskOutput, "output", "0.20")
	optional := func(name string) *float64 {
		v := strings.TrimSpace(get(name))
		if v == "" {
			return nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fe.Add(name, "Enter a number, or leave it empty.")
			return nil
		}
		return &f
	}
	in.ClaimedTTFTP50Ms = optional("claimed_ttft_p50_ms")
	in.ClaimedTTFTP99Ms = optional("claimed_ttft_p99_ms")
	in.ClaimedTokensPerSec = optional("claimed_tokens_per_second")
	in.Site, in.PUE = carbon.Site(strings.TrimSpace(get("site"))), optional("pue")
	if err := in.Validate(); err != nil {
		if ae, ok := err.(*services.Error); ok {
			for k, v := range ae.Fields {
				fe.Add(k, v)
			}
		}
	}
	return in, fe.Err()
}

// listingFromJSON reads a JSON listing whose values may be numbers or strings.
func listingFromJSON(c echo.Context) (catalog.ListingInput, error) {
	raw := map[string]json.RawMessage{}
	if err := core.DecodeJSON(c, &raw); err != nil {
		return catalog.ListingInput{}, err
	}
	known := map[string]bool{}
	for _, f := range listingFields {
		known[f] = true
	}
	for k := range raw {
		if !known[k] {
			return catalog.ListingInput{}, &services.Error{Code: services.CodeInvalid, Message: "Unknown field " + k + ".",
				Fields: map[string]string{k: "Unknown field."}}
		}
	}
	return listingInput(func(name string) string {
		v := strings.TrimSpace(string(raw[name]))
		if v == "null" {
			return ""
		}
		if s, err := strconv.Unquote(v); err == nil {
			return s
		}
		return v
	})
}

// siteOptions are where a rig can run; empty lets the GPU model decide (catalog.DefaultSite).
func siteOptions() []templates.Option {
	return []templates.Option{
		{Value: "", Label: "By GPU model: a data centre for enterprise cards, a home otherwise"},
		{Value: string(carbon.SiteHome), Label: "Home (default PUE 1.0)"},
		{Value: string(carbon.SiteDatacentre), Label: "Data centre (default PUE 1.3)"},
	}
}

// pueHint says what an empty PUE field means for the site chosen (or the GPU's default site).
func pueHint(site, gpu string) string {
	s := carbon.Site(site)
	if !s.Valid() {
		s = catalog.DefaultSite(gpu)
	}
	return "Empty: " + core.DefaultPUEText(s) + ". A stated PUE is between 1.0 and 3.0."
}

func (s *Server) rigsPage(c echo.Context) error {
	ctx := c.Request().Context()
	list, err := s.catalog.ListOwn(ctx, core.ProviderAccount(c))
	if err != nil {
		return err
	}
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	rows := make([]templates.OfferingRow, 0, len(list))
	for _, o := range list {
		rows = append(rows, core.OwnOfferingRow(o, book.ForModel(o.Model, now), now))
	}
	if err := core.WithProviderBenchmarks(c, s.benchmarks, ownBenchmarkURL, rows); err != nil {
		return err
	}
	return s.Render(c, http.StatusOK, templates.Rigs(templates.RigsPage{Page: s.Page(c, "My rigs"), Rigs: rows}))
}

func (s *Server) listingPage(c echo.Context, status int, id string, form templates.Form) error {
	title := "List a rig"
	if id != "" {
		title = "Edit rig"
	}
	return s.Render(c, status, templates.Listing(templates.ListingPage{
		Page: s.Page(c, title), Form: form, GPUs: core.GPUOptions(), Regions: core.RegionOptions(), EditID: id,
		Sites: siteOptions(), PUEHint: pueHint(form.Get("site"), form.Get("gpu")),
	}))
}

func (s *Server) newRigPage(c echo.Context) error {
	return s.listingPage(c, http.StatusOK, "", templates.Form{Values: map[string]string{
		"gpu": "rtx-4090", "gpu_count": "4", "region": "eu",
	}})
}

func formValues(c echo.Context) map[string]string {
	v := map[string]string{}
	for _, f := range listingFields {
		v[f] = c.FormValue(f)
	}
	return v
}

func (s *Server) createRigSubmit(c echo.Context) error {
	in, err := listingInput(c.FormValue)
	if err == nil {
		_, err = s.catalog.Create(c.Request().Context(), core.ProviderAccount(c), in)
	}
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = formValues(c)
			return s.listingPage(c, core.StatusFor(err), "", f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs?flash=listed")
}

func (s *Server) editRigPage(c echo.Context) error {
	o, err := s.catalog.Own(c.Request().Context(), core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	v := map[string]string{"gpu": o.GPU, "gpu_count": strconv.Itoa(o.GPUCount), "region": o.Region, "model": o.Model,
		catalog.FieldAskInput: o.AskInput.Decimal(), catalog.FieldAskOutput: o.AskOutput.Decimal()}
	v["site"] = string(o.Site)
	for name, p := range map[string]*float64{"claimed_ttft_p50_ms": o.ClaimedTTFTP50Ms, "claimed_ttft_p99_ms": o.ClaimedTTFTP99Ms,
		"claimed_tokens_per_second": o.ClaimedTokensPerSec, "pue": o.StatedPUE} {
		if p != nil {
			v[name] = strconv.FormatFloat(*p, 'f', -1, 64)
		}
	}
	return s.listingPage(c, http.StatusOK, o.ID, templates.Form{Values: v})
}

func (s *Server) updateRigSubmit(c echo.Context) error {
	id := c.Param("id")
	ctx := c.Request().Context()
	// Look the rig up first so that another provider's rig is a 404, not a form.
	if _, err := s.catalog.Own(ctx, core.ProviderAccount(c), id); err != nil {
		return err
	}
	in, err := listingInput(c.FormValue)
	if err == nil {
		_, err = s.catalog.Update(ctx, core.ProviderAccount(c), id, in)
	}
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = formValues(c)
			return s.listingPage(c, core.StatusFor(err), id, f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs?flash=saved")
}

var statusActions = map[string]struct {
	status catalog.Status
	flash  string
}{
	"pause":  {catalog.StatusPaused, "paused"},
	"resume": {catalog.StatusActive, "resumed"},
	"delist": {catalog.StatusDelisted, "delisted"},
}

func (s *Server) rigStatusSubmit(c echo.Context) error {
	a, ok := statusActions[c.Param("action")]
	if !ok {
		return echo.ErrNotFound
	}
	if a.status == catalog.StatusDelisted {
		o, err := s.catalog.Own(c.Request().Context(), core.ProviderAccount(c), c.Param("id"))
		if err != nil {
			return err
		}
		name := catalog.Label(o.GPU, o.GPUCount, o.Model, o.Region)
		conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Delist " + name,
			Consequences: []string{
				"Delisting " + name + " takes it out of the catalog for good: the gateway stops routing to it, and it cannot be resumed.",
				"What it has already served stays on your statements. To stop traffic for a while instead, pause it.",
			},
			Button: "Delist the rig", Action: "/provider/rigs/" + o.ID + "/delist", Back: "/provider/rigs", Danger: true},
			Binds: []string{"delist rig", o.ID}}
		if !core.Confirmed(c, conf) {
			return s.AskToConfirm(c, "Delist a rig", conf)
		}
	}
	if err := s.catalog.SetStatus(c.Request().Context(), core.ProviderAccount(c), c.Param("id"), a.status); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs?flash="+a.flash)
}

// JSON API for providers.

func (s *Server) ownJSON(c echo.Context, o catalog.Offering, status int) error {
	prices, err := s.catalog.CurrentModelPrices(c.Request().Context(), o.Model)
	if err != nil {
		return err
	}
	return c.JSON(status, s.ownOfferingJSON(o, prices))
}

// ownOfferingJSON is the offering as its provider sees it in the API, at prices (those in force for its model),
// with where its rig stands and why.
func (s *Server) ownOfferingJSON(o catalog.Offering, prices map[catalog.Tier]catalog.Price) core.OfferingJSON {
	j := core.OfferingToJSON(o, prices, true)
	j.RigStateReason = o.RigStateReason(s.Now())
	j.NativeAPIs, j.APIsServed = o.RigNativeAPIs, o.APIsServed()
	return j
}

func (s *Server) apiListRigs(c echo.Context) error {
	ctx := c.Request().Context()
	list, err := s.catalog.ListOwn(ctx, core.ProviderAccount(c))
	if err != nil {
		return err
	}
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	out := make([]core.OfferingJSON, 0, len(list))
	for _, o := range list {
		out = append(out, s.ownOfferingJSON(o, book.ForModel(o.Model, now)))
	}
	return c.JSON(http.StatusOK, map[string]any{"offerings": out, "count": len(out)})
}

func (s *Server) apiCreateRig(c echo.Context) error {
	in, err := listingFromJSON(c)
	if err != nil {
		return err
	}
	o, err := s.catalog.Create(c.Request().Context(), core.ProviderAccount(c), in)
	if err != nil {
		return err
	}
	return s.ownJSON(c, o, http.StatusCreated)
}

func (s *Server) apiGetRig(c echo.Context) error {
	o, err := s.catalog.Own(c.Request().Context(), core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	return s.ownJSON(c, o, http.StatusOK)
}

func (s *Server) apiUpdateRig(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id")); err != nil {
		return err
	}
	in, err := listingFromJSON(c)
	if err != nil {
		return err
	}
	o, err := s.catalog.Update(ctx, core.ProviderAccount(c), c.Param("id"), in)
	if err != nil {
		return err
	}
	return s.ownJSON(c, o, http.StatusOK)
}

func (s *Server) apiSetStatus(c echo.Context, status catalog.Status) error {
	ctx := c.Request().Context()
	if err := s.catalog.SetStatus(ctx, core.ProviderAccount(c), c.Param("id"), status); err != nil {
		return err
	}
	if status == catalog.StatusDelisted {
		return c.NoContent(http.StatusNoContent)
	}
	o, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	return s.ownJSON(c, o, http.StatusOK)
}

func (s *Server) apiDelistRig(c echo.Context) error { return s.apiSetStatus(c, catalog.StatusDelisted) }
func (s *Server) apiPauseRig(c echo.Context) error  { return s.apiSetStatus(c, catalog.StatusPaused) }
func (s *Server) apiResumeRig(c echo.Context) error { return s.apiSetStatus(c, catalog.StatusActive) }
