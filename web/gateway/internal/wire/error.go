// Package wire holds what the gateway's packages read and write on the wire: the error as the gateway answers it,
// before it is rendered in OpenAI's shape or a dialect's (package dialect); the reader of a JSON object's
// top-level members, which reads a request's members and an answer's without a map; and the usage member of an
// answer, read, and written with the request's cost. Only packages under web/gateway import it; it imports none
// of them.
package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Error is an error as the gateway answers it, rendered in OpenAI's shape or in the request's dialect's.
type Error struct {
	Status  int
	Type    string // OpenAI's error type: invalid_request_error, insufficient_quota, ...
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

// InvalidRequest is a 400 about the request's body or headers.
func InvalidRequest(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: code,
		Message: fmt.Sprintf(format, args...)}
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
