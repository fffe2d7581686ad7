package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// Each of the gateway's errors answers with the status, OpenAI type and code its clients read, and
// with the Anthropic type of that status.
func TestGatewayErrorsByTheTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err                     error
		status                  int
		openAIType, code, param string
		anthropicType           string
	}{
		{fmt.Errorf("admit: %w", admission.ErrCreditSpent), 402, "insufficient_quota", "insufficient_quota", "", "billing_error"},
		{admission.ErrKeyLimitReached, 402, "insufficient_quota", "insufficient_quota", "", "billing_error"},
		{routing.ErrUnknownModel, 404, "invalid_request_error", "model_not_found", "model", "not_found_error"},
		{routing.ErrUnknownOffering, 404, "invalid_request_error", "offering_not_found", "gpumarket.offering", "not_found_error"},
		{routing.ErrTierNotOffered, 503, "server_error", "tier_not_offered", "", "overloaded_error"},
		{routing.ErrUnavailable, 503, "server_error", "no_capacity", "", "overloaded_error"},
		{services.Errorf(services.CodeUnauthorized, "No API key."), 401, "invalid_request_error", "invalid_api_key", "", "authentication_error"},
		{services.FieldErrors{"messages": "is empty"}.Err(), 400, "invalid_request_error", "", "messages", "invalid_request_error"},
		{services.Errorf(services.CodeUnavailable, "down"), 503, "server_error", "unavailable", "", "overloaded_error"},
		{fmt.Errorf("disk on fire"), 500, "server_error", "", "", "api_error"},
	} {
		ge := wire.Describe(tc.err)
		if ge.Status != tc.status || ge.Type != tc.openAIType || ge.Code != tc.code || ge.Param != tc.param {
			t.Errorf("%v: %d %s code %q param %q, want %d %s code %q param %q", tc.err, ge.Status, ge.Type, ge.Code, ge.Param,
				tc.status, tc.openAIType, tc.code, tc.param)
		}
		var body struct {
			Error struct{ Type string } `json:"error"`
		}
		if err := json.Unmarshal(dialect.Anthropic{}.ErrorBody(ge), &body); err != nil || body.Error.Type != tc.anthropicType {
			t.Errorf("%v: Anthropic type %q (%v), want %s", tc.err, body.Error.Type, err, tc.anthropicType)
		}
	}
}
