// Package httperr holds the one table of how an error is answered over HTTP: for each code, the
// status the pages and the JSON API answer with, the status the /v1 gateway answers with, and the
// error type of OpenAI's shape and of Anthropic's. The pages' error rendering (web/internal/core),
// the gateway's (web/gateway) and its dialects' (web/gateway/dialect) read their statuses and types
// here and nowhere else, so that a code means the same on every surface. A page's title is the
// status's text (http.StatusText), so it needs no column of its own.
//
// The table's first rows are the application's codes (services.Code). The rows after them are
// codes that only the gateway answers: refusals that are not an application error (a spent
// credit, a body too large) and upstream answers it passes on (a rig's 502, 504 or 529).
package httperr

import (
	"net/http"

	"github.com/gpumarket/gpumarket/services"
)

// Codes that only the gateway answers; each has a row in Table.
const (
	// CodeQuotaSpent is a request refused because the account's credit or the key's monthly limit
	// is spent. OpenAI's SDKs do not retry its 402; Anthropic names it billing_error.
	CodeQuotaSpent services.Code = "insufficient_quota"
	// CodeTooLarge is a request or an answer larger than the gateway takes.
	CodeTooLarge services.Code = "too_large"
	// CodeBadGateway is a rig's answer the gateway could not read.
	CodeBadGateway services.Code = "bad_gateway"
	// CodeTimeout is a rig that did not answer in time.
	CodeTimeout services.Code = "timeout"
	// CodeOverloaded is a rig's 529, Anthropic's status for an overloaded server. The gateway's own
	// refusal when nothing can serve is CodeUnavailable's 503, which Anthropic's SDKs retry alike.
	CodeOverloaded services.Code = "overloaded"
)

// InternalMessage is what a user reads of a fault of ours; its cause goes to the log only.
const InternalMessage = "Internal error. It has been logged; please try again."

// Row is how one code is answered on each surface.
type Row struct {
	Code services.Code
	// Status is the pages' and the JSON API's status.
	Status int
	// GatewayStatus is the /v1 gateway's status, which follows OpenAI's: a broken rule is 400
	// there, where the pages answer 422.
	GatewayStatus int
	// OpenAIType is the error's "type" in OpenAI's shape.
	OpenAIType string
	// AnthropicType is the error's "type" in Anthropic's shape.
	AnthropicType string
	// Message, when set, replaces the error's own message on every surface: a fault of ours says
	// only that it was logged.
	Message string
}

// Table is every code once. Of and ForStatus look codes and statuses up in it.
var Table = []Row{
	{Code: services.CodeInvalid, Status: http.StatusUnprocessableEntity, GatewayStatus: http.StatusBadRequest,
		OpenAIType: "invalid_request_error", AnthropicType: "invalid_request_error"},
	{Code: services.CodeNotFound, Status: http.StatusNotFound, GatewayStatus: http.StatusNotFound,
		OpenAIType: "invalid_request_error", AnthropicType: "not_found_error"},
	{Code: services.CodeConflict, Status: http.StatusConflict, GatewayStatus: http.StatusConflict,
		OpenAIType: "invalid_request_error", AnthropicType: "invalid_request_error"},
	{Code: services.CodeUnauthorized, Status: http.StatusUnauthorized, GatewayStatus: http.StatusUnauthorized,
		OpenAIType: "invalid_request_error", AnthropicType: "authentication_error"},
	{Code: services.CodeForbidden, Status: http.StatusForbidden, GatewayStatus: http.StatusForbidden,
		OpenAIType: "invalid_request_error", AnthropicType: "permission_error"},
	// OpenAI types a rate limit "requests" (with code rate_limit_exceeded); its SDKs retry a 429.
	{Code: services.CodeRateLimited, Status: http.StatusTooManyRequests, GatewayStatus: http.StatusTooManyRequests,
		OpenAIType: "requests", AnthropicType: "rate_limit_error"},
	{Code: services.CodeInternal, Status: http.StatusInternalServerError, GatewayStatus: http.StatusInternalServerError,
		OpenAIType: "server_error", AnthropicType: "api_error", Message: InternalMessage},
	// Anthropic answers overloaded_error with 529; the gateway keeps 503, which every SDK retries.
	{Code: services.CodeUnavailable, Status: http.StatusServiceUnavailable, GatewayStatus: http.StatusServiceUnavailable,
		OpenAIType: "server_error", AnthropicType: "overloaded_error"},

	{Code: CodeQuotaSpent, Status: http.StatusPaymentRequired, GatewayStatus: http.StatusPaymentRequired,
		OpenAIType: "insufficient_quota", AnthropicType: "billing_error"},
	{Code: CodeTooLarge, Status: http.StatusRequestEntityTooLarge, GatewayStatus: http.StatusRequestEntityTooLarge,
		OpenAIType: "invalid_request_error", AnthropicType: "request_too_large"},
	{Code: CodeBadGateway, Status: http.StatusBadGateway, GatewayStatus: http.StatusBadGateway,
		OpenAIType: "server_error", AnthropicType: "api_error"},
	{Code: CodeTimeout, Status: http.StatusGatewayTimeout, GatewayStatus: http.StatusGatewayTimeout,
		OpenAIType: "server_error", AnthropicType: "timeout_error"},
	{Code: CodeOverloaded, Status: 529, GatewayStatus: 529,
		OpenAIType: "server_error", AnthropicType: "overloaded_error"},
}

// Of is the row of a code; a code the table does not hold is answered as internal, a fault of ours.
func Of(code services.Code) Row {
	for _, r := range Table {
		if r.Code == code {
			return r
		}
	}
	return Of(services.CodeInternal)
}

// ForStatus is the row of a status the gateway answers, the first whose GatewayStatus it is. A
// status no row holds (an upstream's 418, the router's 405) is answered by its class alone, as
// Fallback says.
func ForStatus(status int) Row {
	for _, r := range Table {
		if r.GatewayStatus == status {
			return r
		}
	}
	return Fallback(status)
}

// Fallback is what a status answers by its class alone: a client's mistake below 500, a fault on
// the server's side from 500. Its Code is empty. The gateway answers so the statuses it did not choose itself: the
// router's refusals and a rig's error without a body of OpenAI's shape.
func Fallback(status int) Row {
	if status >= 500 {
		return Row{Status: status, GatewayStatus: status, OpenAIType: "server_error", AnthropicType: "api_error"}
	}
	return Row{Status: status, GatewayStatus: status,
		OpenAIType: "invalid_request_error", AnthropicType: "invalid_request_error"}
}
