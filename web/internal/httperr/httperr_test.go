package httperr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// applicationCodes reads every constant of type Code that services/errors.go declares, so that a
// code added there without a row here fails the test.
func applicationCodes(t *testing.T) []services.Code {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../../services/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []services.Code
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, val := range v.Values {
				lit := val.(*ast.BasicLit)
				codes = append(codes, services.Code(lit.Value[1:len(lit.Value)-1]))
			}
		}
	}
	if len(codes) < 8 {
		t.Fatalf("read %d codes from services/errors.go, want at least 8: %v", len(codes), codes)
	}
	return codes
}

// Every application code has its own row, each row is there once, and every row answers with a
// status and a type in each shape.
func TestEveryCodeHasOneRowWithAStatusAndATypeInEachShape(t *testing.T) {
	t.Parallel()
	seen := map[services.Code]int{}
	for _, r := range httperr.Table {
		seen[r.Code]++
		if r.Code == "" || r.Status < 400 || r.GatewayStatus < 400 || r.OpenAIType == "" || r.AnthropicType == "" {
			t.Errorf("row %+v lacks a code, a status or a type", r)
		}
	}
	for code, n := range seen {
		if n != 1 {
			t.Errorf("code %q has %d rows, want 1", code, n)
		}
	}
	for _, code := range applicationCodes(t) {
		if seen[code] != 1 {
			t.Errorf("application code %q has no row", code)
		}
		if got := httperr.Of(code).Code; got != code {
			t.Errorf("Of(%q) is the row of %q", code, got)
		}
	}
}

// The statuses and types that the pages, the JSON API and the gateway's SDK clients rely on.
func TestTheMappingsClientsRelyOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code                  services.Code
		status, gatewayStatus int
		openAI, anthropic     string
	}{
		{services.CodeInvalid, 422, 400, "invalid_request_error", "invalid_request_error"},
		{services.CodeNotFound, 404, 404, "invalid_request_error", "not_found_error"},
		{services.CodeConflict, 409, 409, "invalid_request_error", "invalid_request_error"},
		{services.CodeUnauthorized, 401, 401, "invalid_request_error", "authentication_error"},
		{services.CodeForbidden, 403, 403, "invalid_request_error", "permission_error"},
		{services.CodeRateLimited, 429, 429, "requests", "rate_limit_error"},
		{services.CodeInternal, 500, 500, "server_error", "api_error"},
		{services.CodeUnavailable, 503, 503, "server_error", "overloaded_error"},
		{httperr.CodeQuotaSpent, 402, 402, "insufficient_quota", "billing_error"},
		{httperr.CodeTooLarge, 413, 413, "invalid_request_error", "request_too_large"},
		{httperr.CodeBadGateway, 502, 502, "server_error", "api_error"},
		{httperr.CodeTimeout, 504, 504, "server_error", "timeout_error"},
		{httperr.CodeOverloaded, 529, 529, "server_error", "overloaded_error"},
	} {
		r := httperr.Of(tc.code)
		if r.Status != tc.status || r.GatewayStatus != tc.gatewayStatus || r.OpenAIType != tc.openAI || r.AnthropicType != tc.anthropic {
			t.Errorf("Of(%q) = %d/%d %s/%s, want %d/%d %s/%s", tc.code, r.Status, r.GatewayStatus, r.OpenAIType, r.AnthropicType,
				tc.status, tc.gatewayStatus, tc.openAI, tc.anthropic)
		}
	}
}

// Anthropic's type is read by the status the gateway answers, its own or a rig's.
func TestAnthropicTypeOfAStatus(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error",
		404: "not_found_error", 405: "invalid_request_error", 409: "invalid_request_error", 413: "request_too_large",
		422: "invalid_request_error", 429: "rate_limit_error", 499: "invalid_request_error", 500: "api_error",
		502: "api_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error", 507: "api_error",
	} {
		if got := httperr.ForStatus(status).AnthropicType; got != want {
			t.Errorf("ForStatus(%d).AnthropicType = %s, want %s", status, got, want)
		}
	}
}

// A status that no row holds is answered by its class alone.
func TestFallbackByClass(t *testing.T) {
	t.Parallel()
	if r := httperr.Fallback(http.StatusMethodNotAllowed); r.OpenAIType != "invalid_request_error" || r.Code != "" {
		t.Errorf("Fallback(405) = %+v", r)
	}
	if r := httperr.Fallback(http.StatusBadGateway); r.OpenAIType != "server_error" || r.AnthropicType != "api_error" {
		t.Errorf("Fallback(502) = %+v", r)
	}
}

// An unknown code and a fault of ours answer 500 with the message that hides the cause.
func TestAnUnknownCodeIsInternal(t *testing.T) {
	t.Parallel()
	r := httperr.Of("no_such_code")
	if r.Code != services.CodeInternal || r.Status != 500 || r.Message != httperr.InternalMessage {
		t.Errorf("Of(no_such_code) = %+v", r)
	}
	if m := httperr.Of(services.CodeUnavailable).Message; m != "" {
		t.Errorf("an unavailable error's own message is replaced by %q", m)
	}
}
