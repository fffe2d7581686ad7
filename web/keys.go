package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
)

// keyFields are the fields of the form that creates a key, as the page posts them.
var keyFields = []string{"name", "monthly_limit_usd", "default_tier"}

// keyTierOptions are the default tiers a key may carry; none leaves the choice to the gateway.
func keyTierOptions() []templates.Option {
	return []templates.Option{
		{Value: "", Label: "None (standard, unless a request chooses)"},
		{Value: "realtime", Label: "Realtime"},
		{Value: "standard", Label: "Standard"},
		{Value: "batch", Label: "Batch"},
	}
}

// newKeyInput reads a key to create from text values (a form, or a JSON body's values) and
// reports every problem at once. A monthly limit is dollars and cents: that is how a person
// budgets, and how the page shows it back.
func newKeyInput(name, limitUSD, tier string) (accounts.NewKeyInput, error) {
	fe := services.FieldErrors{}
	in := accounts.NewKeyInput{Name: name, DefaultTier: strings.TrimSpace(tier)}
	if v := strings.TrimSpace(limitUSD); v != "" {
		limit, err := money.ParseUSD(v)
		if err != nil || limit%money.PicoPerCent != 0 {
			fe.Add("monthly_limit_usd", "Enter dollars and cents, like 25.00, or leave it empty for no limit.")
		} else {
			in.MonthlyLimit = &limit
		}
	}
	var ae *services.Error
	if err := in.Validate(); errors.As(err, &ae) {
		for field, problem := range ae.Fields {
			fe.Add(field, problem)
		}
	}
	return in, fe.Err()
}

// createKey makes a key for the logged-in developer's account and returns its secret.
func (s *Server) createKey(c echo.Context, name, limitUSD, tier string) (accounts.APIKey, string, error) {
	in, err := newKeyInput(name, limitUSD, tier)
	if err != nil {
		return accounts.APIKey{}, "", err
	}
	sess, _ := currentSession(c)
	return s.accounts.CreateKey(c.Request().Context(), sess.User, in)
}

// showSecretOnce marks an answer that carries a key's secret: no cache, shared or the
// browser's own, may keep it.
func showSecretOnce(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

// Pages.

func (s *Server) keysPage(c echo.Context) error {
	return s.renderKeys(c, http.StatusOK, templates.Form{}, nil)
}

func (s *Server) renderKeys(c echo.Context, status int, form templates.Form, created *templates.CreatedKey) error {
	sess, _ := currentSession(c)
	keys, err := s.accounts.Keys(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	rows := make([]templates.KeyRow, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, keyRow(k))
	}
	return s.render(c, status, templates.Keys(templates.KeysPage{Page: s.page(c, "API keys"), Keys: rows, Form: form,
		Tiers: keyTierOptions(), Created: created}))
}

// createKeySubmit creates a key and answers with the page that shows its secret, directly:
// a redirect would have to carry the secret in its URL or keep it somewhere until the next
// request, and it must be in neither.
func (s *Server) createKeySubmit(c echo.Context) error {
	k, secret, err := s.createKey(c, c.FormValue("name"), c.FormValue("monthly_limit_usd"), c.FormValue("default_tier"))
	if err != nil {
		return s.formError(c, err, func(f templates.Form) error {
			f.Values = submitted(c, keyFields...)
			return s.renderKeys(c, statusFor(err), f, nil)
		})
	}
	showSecretOnce(c)
	return s.renderKeys(c, http.StatusCreated, templates.Form{}, &templates.CreatedKey{Name: k.Name, Secret: secret,
		BaseURL: s.baseURL(c) + "/v1", Model: s.exampleModel(c)})
}

// exampleModel is a model on offer, for the examples beside a new key. The key exists by
// then, so a failed lookup must not cost its only showing: it falls back to a placeholder.
func (s *Server) exampleModel(c echo.Context) string {
	models, err := s.catalog.Models(c.Request().Context())
	if err != nil {
		s.log.Warn("models for the API key example", "err", err)
	}
	if len(models) == 0 {
		return "<model>"
	}
	return models[0]
}

func (s *Server) revokeKeySubmit(c echo.Context) error {
	sess, _ := currentSession(c)
	if err := s.accounts.RevokeKey(c.Request().Context(), sess.User.AccountID, c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/keys?flash=key-revoked")
}

func keyRow(k accounts.APIKey) templates.KeyRow {
	r := templates.KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, DefaultTier: "none", MonthlyLimit: "none",
		Created: k.CreatedAt.UTC().Format("2006-01-02 15:04"), LastUsed: "never", Status: keyStatus(k), Live: k.RevokedAt == nil}
	if k.DefaultTier != "" {
		r.DefaultTier = k.DefaultTier
	}
	if k.MonthlyLimit != nil {
		r.MonthlyLimit = k.MonthlyLimit.String()
	}
	if k.LastUsedAt != nil {
		r.LastUsed = k.LastUsedAt.UTC().Format("2006-01-02 15:04")
	}
	return r
}

func keyStatus(k accounts.APIKey) string {
	if k.RevokedAt != nil {
		return "revoked"
	}
	return "live"
}

// JSON API.

// keyJSON is an API key as the API shows it. Key, the secret, is set only in the answer
// that creates the key.
type keyJSON struct {
	ID              string     `json:"id"`
	Key             string     `json:"key,omitempty"`
	Name            string     `json:"name"`
	Prefix          string     `json:"prefix"`
	MonthlyLimitUSD *string    `json:"monthly_limit_usd"` // exact decimal dollars; null: no limit
	DefaultTier     *string    `json:"default_tier"`      // null: the gateway's default
	Status          string     `json:"status"`            // live or revoked
	CreatedAt       time.Time  `json:"created_at"`
	LastUsedAt      *time.Time `json:"last_used_at"`
	RevokedAt       *time.Time `json:"revoked_at"`
}

func keyView(k accounts.APIKey) keyJSON {
	v := keyJSON{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Status: keyStatus(k), CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
	if k.MonthlyLimit != nil {
		usd := strings.TrimPrefix(k.MonthlyLimit.String(), "$")
		v.MonthlyLimitUSD = &usd
	}
	if k.DefaultTier != "" {
		v.DefaultTier = &k.DefaultTier
	}
	return v
}

func (s *Server) apiCreateKey(c echo.Context) error {
	var in struct {
		Name string `json:"name"`
		// A string or a number, read as its exact text, so that an unreadable amount is
		// refused beside the field like a negative one.
		MonthlyLimitUSD json.RawMessage `json:"monthly_limit_usd"`
		DefaultTier     string          `json:"default_tier"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	k, secret, err := s.createKey(c, in.Name, jsonText(in.MonthlyLimitUSD), in.DefaultTier)
	if err != nil {
		return err
	}
	showSecretOnce(c)
	v := keyView(k)
	v.Key = secret
	return c.JSON(http.StatusCreated, v)
}

func (s *Server) apiKeys(c echo.Context) error {
	sess, _ := currentSession(c)
	keys, err := s.accounts.Keys(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyView(k))
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out, "count": len(out)})
}

func (s *Server) apiRevokeKey(c echo.Context) error {
	sess, _ := currentSession(c)
	if err := s.accounts.RevokeKey(c.Request().Context(), sess.User.AccountID, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
