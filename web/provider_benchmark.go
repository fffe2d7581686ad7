package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
)

// The benchmark a provider attaches to a listing: loadgen's result of a run against the offering
// through the gateway, shown as the provider's own claim beside what the platform measured
// (docs/provider-benchmarks.md). Its page and form are the provider's; the catalog and the public
// API show it beside the offering.

// benchmarkRoutes are the provider's benchmark page and form, its API, and the public result.
func (s *Server) benchmarkRoutes(provider *echo.Group, api *echo.Group) {
	provider.GET("/rigs/:id/benchmark", s.rigBenchmarkPage)
	provider.POST("/rigs/:id/benchmark", s.rigBenchmarkSubmit)
	provider.POST("/rigs/:id/benchmark/remove", s.rigBenchmarkRemoveSubmit)
	providerAPI := s.requireAPI(accounts.RoleProvider)
	api.GET("/provider/offerings/:id/benchmark", s.apiOwnBenchmark, providerAPI)
	api.PUT("/provider/offerings/:id/benchmark", s.apiAttachBenchmark, providerAPI)
	api.DELETE("/provider/offerings/:id/benchmark", s.apiRemoveBenchmark, providerAPI)
	api.GET("/offerings/:id/benchmark", s.apiPublicBenchmark)
}

// benchmarksUnavailable answers where no benchmark store is wired.
func benchmarksUnavailable() error {
	return services.Errorf(services.CodeUnavailable, "Benchmarks are not available on this server.")
}

// gatewayURL is the platform's gateway as the caller reaches it: where a run through the
// platform calls.
func (s *Server) gatewayURL(c echo.Context) string { return s.baseURL(c) + "/v1" }

// loadgenCommand runs loadgen against the offering through the gateway, as the benchmark did:
// 200 requests arriving at 8 a second.
func loadgenCommand(gatewayURL string, o catalog.Offering) string {
	return "GPUMARKET_API_KEY=<a developer API key> go run ./cmd/loadgen \\\n  -url " + gatewayURL + " -offering " + o.ID +
		" \\\n  -rate 8 -n 200 -max-tokens 200 -json result.json"
}

// measuredText says what the platform measured of the offering, or why it has not yet.
func measuredText(o catalog.Offering) string {
	if !o.Measured() {
		return fmt.Sprintf("Not yet: the platform shows its own figures once it has observed %d requests (%d so far); until then the catalog shows your listing's claimed figures.",
			catalog.MinMeasuredRequests, o.MeasuredRequests)
	}
	text := "P99 time to first token " + formatMs(*o.MeasuredTTFTP99Ms)
	if p := o.MeasuredTTFTP50Ms; p != nil {
		text = "p50 time to first token " + formatMs(*p) + ", " + strings.ToLower(text[:1]) + text[1:]
	}
	if t := o.MeasuredTokensPerSec; t != nil {
		text += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
	}
	return text + " over " + strconv.FormatInt(o.MeasuredRequests, 10) + " requests of customers' traffic and the platform's probes."
}

// benchmarkView is what the pages show of an attached benchmark.
func benchmarkView(b benchmarks.Benchmark, rawURL string) *templates.ProviderBenchmark {
	at := "all at once"
	if b.Rate > 0 {
		at = "at " + strconv.FormatFloat(b.Rate, 'f', -1, 64) + " requests/s"
	}
	v := &templates.ProviderBenchmark{
		Figures: fmt.Sprintf("p50 TTFT %s, %s tokens/s %s over %d requests", formatMs(b.TTFTP50Ms),
			strconv.FormatFloat(b.TotalTPS, 'f', 0, 64), at, b.Completed),
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

// withProviderBenchmarks puts on each row of the tables the benchmark its provider attached, if
// any, in one query. rawURL is where a row's result can be read.
func (s *Server) withProviderBenchmarks(c echo.Context, rawURL func(id string) string, tables ...[]templates.OfferingRow) error {
	if s.benchmarks == nil {
		return nil
	}
	var ids []string
	for _, rows := range tables {
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	attached, err := s.benchmarks.ForOfferings(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	for _, rows := range tables {
		for i, r := range rows {
			if b, ok := attached[r.ID]; ok {
				rows[i].Benchmark = benchmarkView(b, rawURL(r.ID))
			}
		}
	}
	return nil
}

// withSectionBenchmarks is withProviderBenchmarks for the public catalog's tier sections.
func (s *Server) withSectionBenchmarks(c echo.Context, sections []templates.TierSection) error {
	tables := make([][]templates.OfferingRow, len(sections))
	for i, sec := range sections {
		tables[i] = sec.Offerings
	}
	return s.withProviderBenchmarks(c, publicBenchmarkURL, tables...)
}

func publicBenchmarkURL(id string) string { return "/api/offerings/" + id + "/benchmark" }
func ownBenchmarkURL(id string) string    { return "/api/provider/offerings/" + id + "/benchmark" }

func (s *Server) rigBenchmarkPage(c echo.Context) error {
	return s.renderRigBenchmark(c, http.StatusOK, templates.Form{})
}

// renderRigBenchmark renders the provider's benchmark page for its rig, with the form as given.
func (s *Server) renderRigBenchmark(c echo.Context, status int, form templates.Form) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, providerAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	p := templates.RigBenchmarkPage{Page: s.page(c, "Benchmark your rig"), Rig: offeringRow(o), Measured: measuredText(o),
		Command: loadgenCommand(s.gatewayURL(c), o), Form: form}
	b, found, err := s.benchmarks.Own(ctx, providerAccount(c), o.ID)
	if err != nil {
		return err
	}
	if found {
		p.Attached = benchmarkView(b, ownBenchmarkURL(o.ID))
	}
	return s.render(c, status, templates.RigBenchmark(p))
}

// submittedResult is the result a form sends: its file when one was chosen, else the pasted
// text. Either is read up to one byte past the limit, so that a larger one is refused as such.
func submittedResult(c echo.Context) ([]byte, error) {
	if fh, err := c.FormFile("result_file"); err == nil && fh.Size > 0 {
		f, err := fh.Open()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, benchmarks.MaxResultBytes+1))
	} else if err != nil && !errors.Is(err, http.ErrMissingFile) && !errors.Is(err, http.ErrNotMultipart) {
		return nil, services.Errorf(services.CodeInvalid, "The upload could not be read: send the form again.")
	}
	return []byte(c.FormValue("result")), nil
}

func (s *Server) rigBenchmarkSubmit(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	ctx := c.Request().Context()
	// Look the rig up first so that another provider's rig is a 404, not a form.
	if _, err := s.catalog.Own(ctx, providerAccount(c), c.Param("id")); err != nil {
		return err
	}
	raw, err := submittedResult(c)
	if err == nil {
		sess, _ := currentSession(c)
		_, err = s.benchmarks.Attach(ctx, benchmarks.AttachInput{ProviderAccountID: providerAccount(c), UserID: sess.User.ID,
			OfferingID: c.Param("id"), Result: raw, GatewayURL: s.gatewayURL(c)})
	}
	if err != nil {
		return s.formError(c, err, func(f templates.Form) error {
			// What was sent comes back in the text area, so that nothing is lost; a result over the
			// limit is not worth keeping.
			if len(raw) <= benchmarks.MaxResultBytes {
				f.Values = map[string]string{"result": string(raw)}
			}
			return s.renderRigBenchmark(c, statusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+c.Param("id")+"/benchmark?flash=bench-attached")
}

func (s *Server) rigBenchmarkRemoveSubmit(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	if err := s.benchmarks.Remove(c.Request().Context(), providerAccount(c), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+c.Param("id")+"/benchmark?flash=bench-removed")
}

// benchmarkJSON is an attached benchmark as the API shows it: its figures, its label, and the
// result as it was attached.
type benchmarkJSON struct {
	benchmarks.Benchmark
	Label  string          `json:"label"`
	Result json.RawMessage `json:"result"`
}

// benchmarkLabel says whose figures these are, wherever the API shows them.
const benchmarkLabel = "Benchmarked by the provider: the provider's own claim, not measured by the platform."

func toBenchmarkJSON(b benchmarks.Benchmark) benchmarkJSON {
	return benchmarkJSON{Benchmark: b, Label: benchmarkLabel, Result: json.RawMessage(b.Result)}
}

func (s *Server) apiOwnBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	b, found, err := s.benchmarks.Own(c.Request().Context(), providerAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	if !found {
		return services.Errorf(services.CodeNotFound, "No benchmark is attached to this rig.")
	}
	return c.JSON(http.StatusOK, toBenchmarkJSON(b))
}

// apiAttachBenchmark takes loadgen's JSON result as the request's body.
func (s *Server) apiAttachBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, benchmarks.MaxResultBytes+1))
	if err != nil {
		return err
	}
	sess, _ := currentSession(c)
	b, err := s.benchmarks.Attach(c.Request().Context(), benchmarks.AttachInput{ProviderAccountID: providerAccount(c),
		UserID: sess.User.ID, OfferingID: c.Param("id"), Result: bytes.TrimSpace(raw), GatewayURL: s.gatewayURL(c)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toBenchmarkJSON(b))
}

func (s *Server) apiRemoveBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
	}
	if err := s.benchmarks.Remove(c.Request().Context(), providerAccount(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiPublicBenchmark is the benchmark attached to an offering the public catalog lists.
func (s *Server) apiPublicBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return benchmarksUnavailable()
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
	return c.JSON(http.StatusOK, toBenchmarkJSON(b))
}
