package simulation

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// requestError is a request the server refuses: the status, what OpenAI's error body says of it
// (its type, the member at fault and a code, each "" when there is none) and the message. It is
// written in the error shape of the API the request came by (errorShape), so that a client of
// each API reads it with its own SDK.
type requestError struct {
	status  int
	typ     string // OpenAI's error type: invalid_request_error or server_error
	param   string
	code    string
	message string
}

// invalid is a 400 about the member param.
func invalid(param, format string, args ...any) *requestError {
	return &requestError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param,
		message: fmt.Sprintf(format, args...)}
}

// errorShape is the error body of an API.
type errorShape int

const (
	// openAIErrors is {"error": {"message", "type", "param", "code"}}, an empty param or code
	// null: chat completions, completions, embeddings and the Responses API.
	openAIErrors errorShape = iota
	// anthropicErrors is {"type": "error", "error": {"type", "message"}}, the type by the status
	// as Anthropic names it: the Messages API.
	anthropicErrors
)

// apiHandler serves a request. It returns the refusal to write when it refuses the request
// before answering; once it answers, it returns nil.
type apiHandler func(w http.ResponseWriter, r *http.Request) *requestError

// serve makes an http.HandlerFunc of f that writes its refusals in the shape.
func (s errorShape) serve(f apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := f(w, r); e != nil {
			s.write(w, e)
		}
	}
}

func (s errorShape) write(w http.ResponseWriter, e *requestError) {
	var body any
	switch s {
	case anthropicErrors:
		body = anthropicErrorBody{Type: "error", Error: anthropicErrorDetail{Type: anthropicErrorType(e.status), Message: e.message}}
	default:
		orNull := func(s string) *string {
			if s == "" {
				return nil
			}
			return &s
		}
		body = errorBody{Error: errorDetail{Message: e.message, Type: e.typ, Param: orNull(e.param), Code: orNull(e.code)}}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

// anthropicErrorType is Anthropic's error type of a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anthropicErrorBody struct {
	Type  string               `json:"type"` // error
	Error anthropicErrorDetail `json:"error"`
}

type anthropicErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
