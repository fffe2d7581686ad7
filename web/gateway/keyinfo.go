package gateway

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/web/gateway/keyinfo"
)

// keyInfoPaths are where a key reads its own limit and spend: the gateway's /v1/key, and
// /api/v1/key, the address OpenRouter's clients call it at.
var keyInfoPaths = []string{"/v1/key", "/api/v1/key"}

// key answers GET /v1/key: the calling key's limit, period, spend and reset, from the meter's
// billed figures (requests in flight or not yet metered are not in them; package keyinfo).
func (g *Gateway) key(c echo.Context) error {
	key, err := g.admitKey(c)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	if g.cfg.Budgets == nil {
		return g.writeGatewayError(c, services.Errorf(services.CodeUnavailable, "Key usage is not available in this process."))
	}
	us, err := g.cfg.Budgets.KeyUsages(c.Request().Context(), []accounts.APIKey{key})
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"data": keyinfo.Of(key, us[0])})
}
