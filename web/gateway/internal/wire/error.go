// Package wire holds what the gateway's packages read and write on the wire: the error as the gateway answers it,
// before it is rendered in OpenAI's shape or a dialect's (package dialect), and the code each error the gateway
// meets answers with (Describe, describe.go); the reader of a JSON object's top-level members, which reads a
// request's members and an answer's without a map; and the usage member of an answer, read, and written with the
// request's cost. Only packages under web/gateway import it; it imports none of them. An error's status and type
// come from the table in web/internal/httperr.
package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// Error is an error as the gateway answers it, rendered in OpenAI's shape or in the request's dialect's.
type Error struct {
	Status  int
	Type    string // OpenAI's error type, from the table in package httperr: invalid_request_error, insufficient_quota, ...
	Code    string // "" for null
	Param   string // "" for null
	Message string
	// RetryAfter, when set, goes out as a Retry-After header, in whole seconds.
	RetryAfter time.Duration
	Cause      error // for the log
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Type, e.Message, e.Cause)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// New is an error of the code with the status and OpenAI type the table in package httperr gives it;
// openAICode and param are OpenAI's "code" and "param", "" for null.
func New(code services.Code, openAICode, param, message string) *Error {
	row := httperr.Of(code)
	return &Error{Status: row.GatewayStatus, Type: row.OpenAIType, Code: openAICode, Param: param, Message: message}
}

// InvalidRequest is a 400 about the request's body or headers.
func InvalidRequest(param, code, format string, args ...any) *Error {
	return New(services.CodeInvalid, code, param, fmt.Sprintf(format, args...))
}

// OpenAIError is OpenAI's error body.
type OpenAIError struct {
	Error OpenAIErrorBody `json:"error"`
}

// OpenAIErrorBody is what OpenAIError holds.
type OpenAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// OpenAIJSON is the error's body in OpenAI's shape.
func OpenAIJSON(e *Error) []byte {
	body := OpenAIErrorBody{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		body.Param = &e.Param
	}
	if e.Code != "" {
		body.Code = &e.Code
	}
	raw, _ := json.Marshal(OpenAIError{Error: body}) // strings only: it always encodes
	return raw
}
