package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
)

// DecodeJSON reads a JSON body strictly: unknown fields and trailing data are errors that
// say what is wrong, as a 422 with the field named where possible.
func DecodeJSON(c echo.Context, v any) error {
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return services.Errorf(services.CodeInvalid, "Send a JSON body with Content-Type: application/json.")
	}
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badJSON(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return services.Errorf(services.CodeInvalid, "The body holds more than one JSON value.")
	}
	return nil
}

func badJSON(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{te.Field: fmt.Sprintf("Expected a %s.", jsonKind(te.Type.Kind().String()))}}
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &services.Error{Code: services.CodeInvalid, Message: "Unknown field " + field + ".",
			Fields: map[string]string{field: "Unknown field."}}
	}
	if errors.Is(err, io.EOF) {
		return services.Errorf(services.CodeInvalid, "The body is empty; send a JSON object.")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		return services.Errorf(services.CodeInvalid, "The body is not valid JSON.")
	}
	// An error of a value's own decoder (an amount that does not parse, say).
	return services.Errorf(services.CodeInvalid, "Invalid value: %s.", err.Error())
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "float64", "int32":
		return "number"
	case "bool":
		return "true or false"
	default:
		return k
	}
}
