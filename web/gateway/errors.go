package gateway

import (
	"context"
	"encoding/json"
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
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/routing"
)

// The /v1 gateway answers errors in OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, so that every OpenAI SDK reads them and retries only what is worth retrying: it
// retries 429 and 5xx, never 402. This file is the one place that maps the gateway's errors
// to statuses and types.

// gatewayError is an error as the gateway answers it.
type gatewayError struct {
	status  int
	typ     string // OpenAI's error type: invalid_request_error, insufficient_quota, ...
	code    string // "" for null
	param   string // "" for null
	message string
	// retryAfter, when set, goes out as a Retry-After header, in whole seconds.
	retryAfter time.Duration
	cause      error // for the log
}

func (e *gatewayError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.status, e.typ, e.message, e.cause)
	}
	return fmt.Sprintf("%d %s: %s", e.status, e.typ, e.message)
}

func (e *gatewayError) Unwrap() error { return e.cause }

// invalidRequest is a 400 about the request's body or headers.
func invalidRequest(param, code, format string, args ...any) *gatewayError {
	return &gatewayError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, code: code,
		message: fmt.Sprintf(format, args...)}
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorBody `json:"error"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// describeGatewayError maps any error the gateway meets to what it answers.
func describeGatewayError(err error) *gatewayError {
	var ge *gatewayError
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
		typ := "invalid_request_error"
		if he.Code >= 500 {
			typ = "server_error"
		}
		return &gatewayError{status: he.Code, typ: typ, code: strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"),
			message: msg, cause: he}
	}
	if errors.Is(err, context.Canceled) {
		return &gatewayError{status: statusClientClosed, typ: "invalid_request_error", code: "canceled", message: "The request was canceled."}
	}
	msg := "Internal error. It has been logged; please try again."
	var ae *services.Error
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	switch {
	case errors.Is(err, billing.ErrCreditSpent), errors.Is(err, billing.ErrKeyLimitReached):
		return &gatewayError{status: http.StatusPaymentRequired, typ: "insufficient_quota", code: "insufficient_quota", message: msg}
	case errors.Is(err, routing.ErrUnknownModel):
		return &gatewayError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model", message: msg}
	case errors.Is(err, routing.ErrUnknownOffering):
		return &gatewayError{status: http.StatusNotFound, typ: "invalid_request_error", code: "offering_not_found",
			param: "gpumarket.offering", message: msg}
	case errors.Is(err, routing.ErrTierNotOffered):
		return &gatewayError{status: http.StatusServiceUnavailable, typ: "server_error", code: "tier_not_offered", message: msg}
	case errors.Is(err, routing.ErrOverCaps):
		return &gatewayError{status: http.StatusServiceUnavailable, typ: "server_error", code: "no_offering_under_caps", message: msg}
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
			return &gatewayError{status: http.StatusNotFound, typ: "invalid_request_error", code: "provider_not_found", param: param, message: msg}
		case services.CodeInvalid:
			return &gatewayError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_provider_preferences",
				param: param, message: msg}
		}
		return &gatewayError{status: http.StatusServiceUnavailable, typ: "server_error", code: "no_offering_meets_preferences",
			param: param, message: msg}
	case errors.Is(err, routing.ErrUnavailable), errors.Is(err, routing.ErrNotLoaded):
		return &gatewayError{status: http.StatusServiceUnavailable, typ: "server_error", code: "no_capacity", message: msg,
			retryAfter: time.Second}
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
		return &gatewayError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, message: msg + problems}
	case services.CodeUnauthorized:
		return &gatewayError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
			message: "Invalid API key. Send Authorization: Bearer <key> with a key from the API keys page."}
	case services.CodeUnavailable:
		return &gatewayError{status: http.StatusServiceUnavailable, typ: "server_error", code: "unavailable", message: msg,
			retryAfter: time.Second, cause: err}
	}
	return &gatewayError{status: http.StatusInternalServerError, typ: "server_error",
		message: "Internal error. It has been logged; please try again.", cause: err}
}

// writeGatewayError answers the error; a 5xx's cause goes to the log. Once a response has
// begun there is nothing left to answer.
func (g *Gateway) writeGatewayError(c echo.Context, err error) error {
	if c.Response().Committed {
		return nil
	}
	ge := describeGatewayError(err)
	if ge.status >= 500 && ge.cause != nil {
		g.log.Error("gateway request failed", "path", c.Request().URL.Path, "status", ge.status, "err", ge.cause)
	}
	if ge.retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ge.retryAfter.Seconds()))))
	}
	if d := dialectOf(c); d != nil {
		return c.Blob(ge.status, echo.MIMEApplicationJSON, d.errorBody(ge))
	}
	return c.Blob(ge.status, echo.MIMEApplicationJSON, openAIErrorJSON(ge))
}

// openAIErrorJSON is the error's body in OpenAI's shape.
func openAIErrorJSON(ge *gatewayError) []byte {
	body := openAIErrorBody{Message: ge.message, Type: ge.typ}
	if ge.param != "" {
		body.Param = &ge.param
	}
	if ge.code != "" {
		body.Code = &ge.code
	}
	raw, _ := json.Marshal(openAIError{Error: body}) // strings only: it always encodes
	return raw
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
	return g.writeGatewayError(c, &gatewayError{status: http.StatusNotFound, typ: "invalid_request_error", code: "unknown_url",
		message: fmt.Sprintf("Invalid URL (%s %s). The gateway serves POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses and GET /v1/models.",
			r.Method, strings.TrimSpace(r.URL.Path))})
}
