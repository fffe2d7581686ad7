package gateway

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// The /v1 gateway answers errors in OpenAI's shape, or the request's dialect's, with the code
// wire.Describe gives each of them (package wire's describe.go, the one place that says which).

// writeGatewayError answers the error; a 5xx's cause goes to the log. Once a response has
// begun there is nothing left to answer.
func (g *Gateway) writeGatewayError(c echo.Context, err error) error {
	if c.Response().Committed {
		return nil
	}
	ge := wire.Describe(err)
	if ge.Status >= 500 && ge.Cause != nil {
		g.log.Error("gateway request failed", "path", c.Request().URL.Path, "status", ge.Status, "err", ge.Cause)
	}
	if ge.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ge.RetryAfter.Seconds()))))
	}
	if d := dialectOf(c); d != nil {
		return c.Blob(ge.Status, echo.MIMEApplicationJSON, d.ErrorBody(ge))
	}
	return c.Blob(ge.Status, echo.MIMEApplicationJSON, wire.OpenAIJSON(ge))
}

// handleError answers an error a handler or the router returned, in OpenAI's shape: what the
// gateway's own router refuses (an address it does not serve, a method an address does not
// take) and a panic the platform's middleware recovered.
func (g *Gateway) handleError(err error, c echo.Context) {
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusNotFound {
		_ = g.notFound(c)
		return
	}
	_ = g.writeGatewayError(c, err)
}

// notFound answers an address under /v1 that the gateway does not serve, as OpenAI does.
func (g *Gateway) notFound(c echo.Context) error {
	r := c.Request()
	return g.writeGatewayError(c, wire.New(services.CodeNotFound, "unknown_url", "", fmt.Sprintf("Invalid URL (%s %s). The gateway serves POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses and GET /v1/models.",
		r.Method, strings.TrimSpace(r.URL.Path))))
}
