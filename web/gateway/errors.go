package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// The /v1 gateway answers errors in OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, so that every OpenAI SDK reads them and retries only what is worth retrying: it
// retries 429 and 5xx, never 402. This file is the one place that says which code each of the
// gateway's errors has; the code's status and types are the table's in web/internal/httperr.

// describeGatewayError maps any error the gateway meets to what it answers.
func describeGatewayError(err error) *wire.Error {
	var ge *wire.Error
	if errors.As(err, &ge) {
		return ge
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		// The router's own refusals: an address under /v1 that does not take the method.
		msg := http.StatusText(he.Code)
		if he.Code == http.StatusMethodNotAllowed {
			msg = "This address does not take that method."
		}
		return &wire.Error{Status: he.Code, Type: httperr.Fallback(he.Code).OpenAIType, Code: strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"),
			Message: msg, Cause: he}
	}
	if errors.Is(err, context.Canceled) {
		return &wire.Error{Status: statusClientClosed, Type: httperr.Fallback(statusClientClosed).OpenAIType, Code: "canceled",
			Message: "The request was canceled."}
	}
	msg := httperr.InternalMessage
	var ae *services.Error
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	switch {
	case errors.Is(err, admission.ErrCreditSpent), errors.Is(err, admission.ErrKeyLimitReached),
		errors.Is(err, admission.ErrMemberLimitReached), errors.Is(err, admission.ErrAccountBudgetReached):
		return wire.New(httperr.CodeQuotaSpent, "insufficient_quota", "", msg)
	case errors.Is(err, routing.ErrUnknownModel):
		return wire.New(services.CodeNotFound, "model_not_found", "model", msg)
	case errors.Is(err, routing.ErrUnknownOffering):
		return wire.New(services.CodeNotFound, "offering_not_found", "gpumarket.offering", msg)
	case errors.Is(err, routing.ErrTierNotOffered):
		return wire.New(services.CodeUnavailable, "tier_not_offered", "", msg)
	case errors.Is(err, routing.ErrOverCaps):
		return wire.New(services.CodeUnavailable, "no_offering_under_caps", "", msg)
	case errors.Is(err, routing.ErrPreferences):
		// The field is the one the preferences' rule is named after (routing's preferences.go).
		var param string
		if ae != nil {
			for f := range ae.Fields {
				param = f
			}
		}
		switch services.ErrorCode(err) {
		case services.CodeNotFound:
			return wire.New(services.CodeNotFound, "provider_not_found", param, msg)
		case services.CodeInvalid:
			return wire.New(services.CodeInvalid, "invalid_provider_preferences", param, msg)
		}
		return wire.New(services.CodeUnavailable, "no_offering_meets_preferences", param, msg)
	case errors.Is(err, routing.ErrUnavailable), errors.Is(err, routing.ErrNotLoaded):
		ge := wire.New(services.CodeUnavailable, "no_capacity", "", msg)
		ge.RetryAfter = time.Second
		return ge
	}
	switch services.ErrorCode(err) {
	case services.CodeInvalid:
		param, problems := "", ""
		if ae != nil && len(ae.Fields) > 0 {
			fields := make([]string, 0, len(ae.Fields))
			for f := range ae.Fields {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			param = fields[0]
			for _, f := range fields {
				problems += " " + f + ": " + ae.Fields[f]
			}
		}
		return wire.New(services.CodeInvalid, "", param, msg+problems)
	case services.CodeUnauthorized:
		return wire.New(services.CodeUnauthorized, "invalid_api_key", "",
			"Invalid API key. Send Authorization: Bearer <key> with a key from the API keys page.")
	case services.CodeUnavailable:
		ge := wire.New(services.CodeUnavailable, "unavailable", "", msg)
		ge.RetryAfter, ge.Cause = time.Second, err
		return ge
	}
	ge = wire.New(services.CodeInternal, "", "", httperr.InternalMessage)
	ge.Cause = err
	return ge
}

// writeGatewayError answers the error; a 5xx's cause goes to the log. Once a response has
// begun there is nothing left to answer.
func (g *Gateway) writeGatewayError(c echo.Context, err error) error {
	if c.Response().Committed {
		return nil
	}
	ge := describeGatewayError(err)
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
