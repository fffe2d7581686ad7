package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// APIError is the JSON shape of every error the API returns.
type APIError struct {
	Error APIErrorBody `json:"error"`
}

// APIErrorBody is what an error says: its code, a message for people, and the fields at fault.
type APIErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// HandleError turns any error a handler returns into a response: the user sees a plain
// message, the log gets the cause of every 500.
func (s *Core) HandleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := s.Describe(err)
	if status >= 500 {
		s.Log.Error("request failed", "method", c.Request().Method, "path", c.Path(),
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", err)
	}
	if status == http.StatusTooManyRequests {
		c.Response().Header().Set("Retry-After", "60")
	}
	if wantsJSON(c) {
		_ = c.JSON(status, APIError{Error: body})
		return
	}
	p := s.Page(c, http.StatusText(status))
	_ = s.Render(c, status, templates.Error(templates.ErrorPage{Page: p, Status: status, Message: body.Message}))
}

// Describe is the status and the body an error answers with: an application error's status and
// whether its message is shown come from the table in package httperr.
func (s *Core) Describe(err error) (int, APIErrorBody) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		switch he.Code {
		case http.StatusNotFound:
			msg = "There is nothing here."
		case http.StatusMethodNotAllowed:
			msg = "This address does not take that method."
		case http.StatusRequestEntityTooLarge:
			msg = "The request is too large."
		}
		return he.Code, APIErrorBody{Code: strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"), Message: msg}
	}
	var ae *services.Error
	if errors.As(err, &ae) {
		row := httperr.Of(ae.Code)
		if row.Message != "" {
			return row.Status, APIErrorBody{Code: string(ae.Code), Message: row.Message}
		}
		return row.Status, APIErrorBody{Code: string(ae.Code), Message: ae.Message, Fields: ae.Fields}
	}
	if errors.Is(err, context.Canceled) {
		return 499, APIErrorBody{Code: "canceled", Message: "The request was canceled."}
	}
	internal := httperr.Of(services.CodeInternal)
	return internal.Status, APIErrorBody{Code: string(internal.Code), Message: internal.Message}
}

func wantsJSON(c echo.Context) bool {
	r := c.Request()
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.Contains(r.Header.Get(echo.HeaderAccept), "application/json") && !strings.Contains(r.Header.Get(echo.HeaderAccept), "text/html")
}

// Render writes a component into a buffer first, so that a failed render still becomes a
// proper error page rather than half a page.
func (s *Core) Render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// Recoverer turns a handler's panic into an error, which HandleError logs and answers with 500.
func (s *Core) Recoverer() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if r := recover(); r != nil {
					if r == http.ErrAbortHandler {
						panic(r)
					}
					err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			return next(c)
		}
	}
}
