package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/internal/httperr"
)

// IsPath reports whether a request's path is the gateway's: /v1 or any address under it, and
// /api/v1/key, where OpenRouter's clients read their key's limit (keyinfo.go).
func IsPath(path string) bool {
	return path == "/v1" || strings.HasPrefix(path, "/v1/") || path == "/api/v1/key"
}

// Mount serves the gateway's paths (IsPath) with gw and every other with rest: the platform's
// one address, with the pages, the JSON API and the operations endpoints in rest (package web).
// A nil gw answers the gateway's paths that the gateway role does not run in this process
// (NotRunning), so that no /v1 request ever reaches rest.
func Mount(gw, rest http.Handler) http.Handler {
	if gw == nil {
		gw = NotRunning()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPath(r.URL.Path) {
			gw.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// NotRunning answers every request with 503 in OpenAI's error shape, code gateway_not_running:
// the answer of a process that runs the web role without the gateway role
// (docs/deploy.md, "Roles"). OpenAI's SDKs retry a 503; a load balancer in front sends /v1 to
// the gateway's processes instead.
func NotRunning() http.Handler {
	code := "gateway_not_running"
	raw := mustJSON(wire.OpenAIError{Error: wire.OpenAIErrorBody{Type: httperr.Of(services.CodeUnavailable).OpenAIType, Code: &code,
		Message: "The /v1 gateway does not run in this process (GPUMARKET_ROLES has no gateway): send /v1 requests to a process that runs the gateway role."}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(raw)
	})
}

func mustJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return raw
}
