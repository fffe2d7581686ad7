// Package services holds what every domain package shares: the one application error type,
// with a few codes that the web layer maps to HTTP statuses in one table (web/internal/httperr).
// Domain packages live beneath it (accounts, catalog, ...), each owning its types, rules and
// storage calls.
package services

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Code is the kind of an application error.
type Code string

const (
	CodeInvalid      Code = "invalid"      // the input breaks a rule; Fields says which
	CodeNotFound     Code = "not_found"    // absent, or not the caller's to see
	CodeConflict     Code = "conflict"     // clashes with what is stored (a taken email)
	CodeUnauthorized Code = "unauthorized" // no valid credentials
	CodeForbidden    Code = "forbidden"    // valid credentials, not allowed
	CodeRateLimited  Code = "rate_limited" // too many attempts; try again later
	CodeInternal     Code = "internal"     // a fault of ours; the cause goes to the log only
	CodeUnavailable  Code = "unavailable"  // a dependency is down
)

// Error is an error a user may see. Message is plain and says what to do; Fields maps an
// input field to what is wrong with it.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]string
	Cause   error // for the log only; never shown to users
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+e.Fields[k])
	}
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, strings.Join(parts, "; "))
}

// Errorf returns an *Error of the code with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal for any other
// error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// FieldErrors collects what is wrong with each field of an input.
type FieldErrors map[string]string

// Add records a problem with a field; the first problem recorded for a field is kept.
func (f FieldErrors) Add(field, problem string) {
	if _, ok := f[field]; !ok {
		f[field] = problem
	}
}

// Err returns nil when nothing was recorded, else an invalid *Error carrying the fields.
func (f FieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	return &Error{Code: CodeInvalid, Message: "Please correct the highlighted fields.", Fields: f}
}

// Wrap annotates a non-nil *errp with the operation it went through, keeping the chain.
// Use it as `defer services.Wrap(&err, "catalog.Create(%s)", id)`.
func Wrap(errp *error, format string, args ...any) {
	if *errp != nil {
		*errp = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), *errp)
	}
}
