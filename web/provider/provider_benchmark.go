package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/benchmarks"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The benchmark a provider attaches to a listing: loadgen's result of a run against the offering
// through the gateway, shown as the provider's own claim beside what the platform measured
// (docs/provider-benchmarks.md). Its page and form are the provider's; the catalog and the public
// API show it beside the offering.

// gatewayURL is the platform's gateway as the caller reaches it: where a run through the
// platform calls.
func (s *Server) gatewayURL(c echo.Context) string { return s.BaseURL(c) + "/v1" }

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
	text := "P99 time to first token " + core.FormatMs(*o.MeasuredTTFTP99Ms)
	if p := o.MeasuredTTFTP50Ms; p != nil {
		text = "p50 time to first token " + core.FormatMs(*p) + ", " + strings.ToLower(text[:1]) + text[1:]
	}
	if t := o.MeasuredTokensPerSec; t != nil {
		text += ", " + strconv.FormatFloat(*t, 'f', 0, 64) + " tokens/s"
	}
	return text + " over " + strconv.FormatInt(o.MeasuredRequests, 10) + " requests of customers' traffic and the platform's probes."
}

func ownBenchmarkURL(id string) string { return "/api/provider/offerings/" + id + "/benchmark" }

func (s *Server) rigBenchmarkPage(c echo.Context) error {
	return s.renderRigBenchmark(c, http.StatusOK, templates.Form{})
}

// renderRigBenchmark renders the provider's benchmark page for its rig, with the form as given.
func (s *Server) renderRigBenchmark(c echo.Context, status int, form templates.Form) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	p := templates.RigBenchmarkPage{Page: s.Page(c, "Benchmark your rig"), Rig: core.OfferingRow(o), Measured: measuredText(o),
		Command: loadgenCommand(s.gatewayURL(c), o), Form: form}
	b, found, err := s.benchmarks.Own(ctx, core.ProviderAccount(c), o.ID)
	if err != nil {
		return err
	}
	if found {
		p.Attached = core.BenchmarkView(b, ownBenchmarkURL(o.ID))
	}
	return s.Render(c, status, templates.RigBenchmark(p))
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
		return core.BenchmarksUnavailable()
	}
	ctx := c.Request().Context()
	// Look the rig up first so that another provider's rig is a 404, not a form.
	if _, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id")); err != nil {
		return err
	}
	raw, err := submittedResult(c)
	if err == nil {
		sess, _ := core.CurrentSession(c)
		_, err = s.benchmarks.Attach(ctx, benchmarks.AttachInput{ProviderAccountID: core.ProviderAccount(c), UserID: sess.User.ID,
			OfferingID: c.Param("id"), Result: raw, GatewayURL: s.gatewayURL(c)})
	}
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			// What was sent comes back in the text area, so that nothing is lost; a result over the
			// limit is not worth keeping.
			if len(raw) <= benchmarks.MaxResultBytes {
				f.Values = map[string]string{"result": string(raw)}
			}
			return s.renderRigBenchmark(c, core.StatusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+c.Param("id")+"/benchmark?flash=bench-attached")
}

func (s *Server) rigBenchmarkRemoveSubmit(c echo.Context) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	if err := s.benchmarks.Remove(c.Request().Context(), core.ProviderAccount(c), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+c.Param("id")+"/benchmark?flash=bench-removed")
}

func (s *Server) apiOwnBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	b, found, err := s.benchmarks.Own(c.Request().Context(), core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	if !found {
		return services.Errorf(services.CodeNotFound, "No benchmark is attached to this rig.")
	}
	return c.JSON(http.StatusOK, core.BenchmarkJSONOf(b))
}

// apiAttachBenchmark takes loadgen's JSON result as the request's body.
func (s *Server) apiAttachBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, benchmarks.MaxResultBytes+1))
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	b, err := s.benchmarks.Attach(c.Request().Context(), benchmarks.AttachInput{ProviderAccountID: core.ProviderAccount(c),
		UserID: sess.User.ID, OfferingID: c.Param("id"), Result: bytes.TrimSpace(raw), GatewayURL: s.gatewayURL(c)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, core.BenchmarkJSONOf(b))
}

func (s *Server) apiRemoveBenchmark(c echo.Context) error {
	if s.benchmarks == nil {
		return core.BenchmarksUnavailable()
	}
	if err := s.benchmarks.Remove(c.Request().Context(), core.ProviderAccount(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
