package wire

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// The /v1 gateway answers errors in OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, so that every OpenAI SDK reads them and retries only what is worth retrying: it
// retries 429 and 5xx, never 402. This file is the one place that says which code each of the
// gateway's errors has (Describe); the code's status and types are the table's in web/internal/httperr.

// StatusClientClosed is the status of a request the client left before it was answered (nginx's 499);
// no response was written.
const StatusClientClosed = 499

// Describe maps any error the gateway meets to what it answers.
func Describe(err error) *Error {
	var ge *Error
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
		return &Error{Status: he.Code, Type: httperr.Fallback(he.Code).OpenAIType, Code: strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"),
			Message: msg, Cause: he}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Status: StatusClientClosed, Type: httperr.Fallback(StatusClientClosed).OpenAIType, Code: "canceled",
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
		return New(httperr.CodeQuotaSpent, "insufficient_quota", "", msg)
	case errors.Is(err, routing.ErrUnknownModel):
		return New(services.CodeNotFound, "model_not_found", "model", msg)
	case errors.Is(err, routing.ErrUnknownOffering):
		return New(services.CodeNotFound, "offering_not_found", "gpumarket.offering", msg)
	case errors.Is(err, routing.ErrTierNotOffered):
		return New(services.CodeUnavailable, "tier_not_offered", "", msg)
	case errors.Is(err, routing.ErrOverCaps):
		return New(services.CodeUnavailable, "no_offering_under_caps", "", msg)
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
			return New(services.CodeNotFound, "provider_not_found", param, msg)
		case services.CodeInvalid:
			return New(services.CodeInvalid, "invalid_provider_preferences", param, msg)
		}
		return New(services.CodeUnavailable, "no_offering_meets_preferences", param, msg)
	case errors.Is(err, routing.ErrUnavailable), errors.Is(err, routing.ErrNotLoaded):
		ge := New(services.CodeUnavailable, "no_capacity", "", msg)
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
		return New(services.CodeInvalid, "", param, msg+problems)
	case services.CodeUnauthorized:
		return New(services.CodeUnauthorized, "invalid_api_key", "",
			"Invalid API key. Send Authorization: Bearer <key> with a key from the API keys page.")
	case services.CodeUnavailable:
		ge := New(services.CodeUnavailable, "unavailable", "", msg)
		ge.RetryAfter, ge.Cause = time.Second, err
		return ge
	}
	ge = New(services.CodeInternal, "", "", httperr.InternalMessage)
	ge.Cause = err
	return ge
}
