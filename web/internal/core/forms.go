package core

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// FormError re-renders a form with the error's field messages when the error is the user's
// to fix, and passes any other error on.
func (s *Core) FormError(c echo.Context, err error, rerender func(templates.Form) error) error {
	switch services.ErrorCode(err) {
	case services.CodeInvalid, services.CodeConflict:
		_, body := s.Describe(err)
		return rerender(templates.Form{Errors: body.Fields, Error: body.Message})
	}
	return err
}

// StatusFor is the HTTP status of an error's code by the table in package httperr, 500 for an
// error without one.
func StatusFor(err error) int {
	return httperr.Of(services.ErrorCode(err)).Status
}

// FieldError is an invalid error about one field.
func FieldError(field, problem string) error {
	fe := services.FieldErrors{}
	fe.Add(field, problem)
	return fe.Err()
}

// Submitted returns the named form fields as the page posted them, to show them again.
func Submitted(c echo.Context, names ...string) map[string]string {
	v := make(map[string]string, len(names))
	for _, n := range names {
		v[n] = c.FormValue(n)
	}
	return v
}

// DateLayout is a date as the pages' forms and the API take it.
const DateLayout = "2006-01-02"

// InvalidFields returns the field errors of an invalid input, nil for any other error.
func InvalidFields(err error) map[string]string {
	var ae *services.Error
	if errors.As(err, &ae) && ae.Code == services.CodeInvalid {
		return ae.Fields
	}
	return nil
}
