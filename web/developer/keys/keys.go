package keys

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// keyFields are the fields of the form that creates a key, as the page posts them.
var keyFields = []string{"name", "limit_usd", "limit_period", "default_tier", "prefer"}

// keyPreferOptions are the orders a key's requests may be routed in.
func keyPreferOptions() []templates.Option {
	return []templates.Option{
		{Value: "price", Label: "Price (the cheapest offering that keeps the tier's promise)"},
		{Value: "carbon", Label: "Carbon (the lowest-carbon offering that keeps the tier's promise)"},
	}
}

// keyPeriodOptions are the periods a key's limit may reset on.
func keyPeriodOptions() []templates.Option {
	return []templates.Option{
		{Value: "month", Label: "per month"},
		{Value: "week", Label: "per week (from Monday)"},
		{Value: "day", Label: "per day"},
	}
}

// parseKeyPeriod reads a limit's period; empty is a month. It returns what is wrong, or "".
func parseKeyPeriod(v string) (periods.Period, string) {
	p, err := periods.Parse(strings.TrimSpace(v))
	if err != nil {
		return "", "Choose day, week or month."
	}
	return p, ""
}

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
// reports every problem at once. A limit is dollars and cents per day, week or month: that is
// how a person budgets, and how the page shows it back.
func newKeyInput(name, limitUSD, period, tier, prefer string) (accounts.NewKeyInput, error) {
	fe := services.FieldErrors{}
	in := accounts.NewKeyInput{Name: name, DefaultTier: strings.TrimSpace(tier)}
	switch strings.TrimSpace(prefer) {
	case "", "price":
	case "carbon":
		in.PreferCarbon = true
	default:
		fe.Add("prefer", "Choose price or carbon.")
	}
	limit, problem := parseKeyLimit(limitUSD)
	if problem != "" {
		fe.Add("limit_usd", problem)
	}
	in.Limit = limit
	if in.LimitPeriod, problem = parseKeyPeriod(period); problem != "" {
		fe.Add("limit_period", problem)
	}
	var ae *services.Error
	if err := in.Validate(); errors.As(err, &ae) {
		for field, problem := range ae.Fields {
			fe.Add(field, problem)
		}
	}
	return in, fe.Err()
}

// parseKeyLimit reads a limit in dollars and cents; empty is no limit. It returns what
// is wrong with it, or "".
func parseKeyLimit(limitUSD string) (*money.Pico, string) {
	v := strings.TrimSpace(limitUSD)
	if v == "" {
		return nil, ""
	}
	limit, err := money.ParseUSD(v)
	if err != nil || limit%money.PicoPerCent != 0 {
		return nil, "Enter dollars and cents, like 25.00, or leave it empty for no limit."
	}
	if limit <= 0 {
		return nil, "Set a limit above $0, or leave it empty for none."
	}
	return &limit, ""
}

// setKeyLimit changes the limit of one of the caller's keys (nil: none) and its period, and
// tells the gateways.
func (s *Server) setKeyLimit(c echo.Context, keyID string, limit *money.Pico, period periods.Period) (accounts.APIKey, error) {
	sess, _ := core.CurrentSession(c)
	k, err := s.Accounts.SetKeyLimit(c.Request().Context(), sess.User.AccountID, keyID, limit, period)
	if err != nil {
		return accounts.APIKey{}, err
	}
	s.keyChanged(c.Request().Context(), k.ID)
	return k, nil
}

// revokeKey revokes one of the caller's keys and tells the gateways.
func (s *Server) revokeKey(c echo.Context, keyID string) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.RevokeKey(c.Request().Context(), sess.User.AccountID, keyID); err != nil {
		return err
	}
	s.keyChanged(c.Request().Context(), keyID)
	return nil
}

// createKey makes a key for the logged-in developer's account and returns its secret.
func (s *Server) createKey(c echo.Context, name, limitUSD, period, tier, prefer string) (accounts.APIKey, string, error) {
	in, err := newKeyInput(name, limitUSD, period, tier, prefer)
	if err != nil {
		return accounts.APIKey{}, "", err
	}
	sess, _ := core.CurrentSession(c)
	return s.Accounts.CreateKey(c.Request().Context(), sess.User, in)
}

// showSecretOnce marks an answer that carries a key's secret: no cache, shared or the
// browser's own, may keep it.
func showSecretOnce(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

// Pages.

func (s *Server) keysPage(c echo.Context) error {
	return s.renderKeys(c, http.StatusOK, templates.Form{}, nil, nil)
}

// renderKeys renders the keys page: with the form's values and errors, the key just created
// (shown once), and the limit a row's form could not set.
func (s *Server) renderKeys(c echo.Context, status int, form templates.Form, created *templates.CreatedKey,
	limitErr *templates.KeyLimitError) error {
	sess, _ := core.CurrentSession(c)
	keys, err := s.Accounts.Keys(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	usages, err := s.keyUsages(c, keys)
	if err != nil {
		return err
	}
	rows := make([]templates.KeyRow, 0, len(keys))
	for _, u := range usages {
		rows = append(rows, keyRow(core.Zone(c), u))
	}
	return s.Render(c, status, templates.Keys(templates.KeysPage{Page: s.Page(c, "API keys"), Keys: rows, Form: form,
		Tiers: keyTierOptions(), Prefers: keyPreferOptions(), Periods: keyPeriodOptions(), Created: created, LimitError: limitErr}))
}

// keyUsages are the keys' spend in their periods; without the budgets service, the keys alone.
func (s *Server) keyUsages(c echo.Context, keys []accounts.APIKey) ([]budgets.KeyUsage, error) {
	if s.budgets != nil {
		return s.budgets.KeyUsages(c.Request().Context(), keys)
	}
	out := make([]budgets.KeyUsage, len(keys))
	for i, k := range keys {
		out[i] = budgets.KeyUsage{Key: k}
	}
	return out, nil
}

// createKeySubmit creates a key and answers with the page that shows its secret, directly:
// a redirect would have to carry the secret in its URL or keep it somewhere until the next
// request, and it must be in neither.
func (s *Server) createKeySubmit(c echo.Context) error {
	k, secret, err := s.createKey(c, c.FormValue("name"), c.FormValue("limit_usd"), c.FormValue("limit_period"), c.FormValue("default_tier"),
		c.FormValue("prefer"))
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = core.Submitted(c, keyFields...)
			return s.renderKeys(c, core.StatusFor(err), f, nil, nil)
		})
	}
	showSecretOnce(c)
	return s.renderKeys(c, http.StatusCreated, templates.Form{}, &templates.CreatedKey{Name: k.Name, Secret: secret,
		BaseURL: s.BaseURL(c) + "/v1", Model: s.exampleModel()}, nil)
}

// exampleModel is a model the gateway serves right now, for the examples beside a new key:
// one offered in the standard tier (what a request without a tier gets) when there is one,
// else any on offer; "" when none is.
func (s *Server) exampleModel() string {
	if s.router == nil {
		return ""
	}
	models := s.router.Models()
	for _, m := range models {
		if slices.Contains(m.Tiers, catalog.TierStandard) {
			return m.Model
		}
	}
	if len(models) > 0 {
		return models[0].Model
	}
	return ""
}

// revokeKeySubmit revokes a key once confirmed; before, and for any other POST, it says what
// stops working (core.Confirmation). A key already revoked, or another account's, is not found.
func (s *Server) revokeKeySubmit(c echo.Context) error {
	k, err := s.ownKey(c, c.Param("id"))
	if err != nil {
		return err
	}
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Revoke the key " + k.Name,
		Consequences: []string{
			"Revoking the key " + k.Name + " (" + k.Prefix + "…) cannot be undone.",
			"From the moment it is revoked, every gateway refuses requests made with it (401): any app, script or server that uses it stops working until it is given another key.",
			"Batches created with it stop: their lines not yet run fail with \"The batch's API key was revoked.\" and are not run.",
			"What it has already spent stays on your usage and invoices. Create a new key first if something still needs one.",
		},
		Button: "Revoke " + k.Name, Action: "/keys/" + k.ID + "/revoke", Back: "/keys", Danger: true},
		Binds: []string{"revoke key", k.ID}}
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Revoke a key", conf)
	}
	if err := s.revokeKey(c, k.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/keys?flash=key-revoked")
}

// keyLimitSubmit changes a key's limit and its period from its row on the keys page; an empty
// amount removes the limit.
func (s *Server) keyLimitSubmit(c echo.Context) error {
	limit, problem := parseKeyLimit(c.FormValue("limit_usd"))
	period, periodProblem := parseKeyPeriod(c.FormValue("limit_period"))
	if problem == "" {
		problem = periodProblem
	}
	if problem != "" {
		// Another account's key is not found, whatever the form holds.
		if _, err := s.ownKey(c, c.Param("id")); err != nil {
			return err
		}
		return s.renderKeys(c, http.StatusUnprocessableEntity, templates.Form{}, nil,
			&templates.KeyLimitError{KeyID: c.Param("id"), Value: c.FormValue("limit_usd"), Message: problem})
	}
	if _, err := s.setKeyLimit(c, c.Param("id"), limit, period); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/keys?flash=key-limit-set")
}

// ownKey is one of the caller's live keys; any other is not found.
func (s *Server) ownKey(c echo.Context, keyID string) (accounts.APIKey, error) {
	sess, _ := core.CurrentSession(c)
	keys, err := s.Accounts.Keys(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return accounts.APIKey{}, err
	}
	for _, k := range keys {
		if k.ID == keyID && k.RevokedAt == nil {
			return k, nil
		}
	}
	return accounts.APIKey{}, services.Errorf(services.CodeNotFound, "No such key.")
}

func keyRow(loc *time.Location, u budgets.KeyUsage) templates.KeyRow {
	k := u.Key
	r := templates.KeyRow{ID: k.ID, Name: k.Name, Prefix: k.Prefix, DefaultTier: "none", Limit: "none",
		Created: core.MomentIn(loc, k.CreatedAt, core.ToMinute), LastUsed: "never", Status: keyStatus(k), Live: k.RevokedAt == nil,
		Period: string(k.LimitPeriod), Spent: money.FormatPrecise(u.InPeriod), Remaining: "—",
		Resets: core.MomentIn(loc, u.ResetsAt, "Mon 2 Jan 15:04")}
	if k.DefaultTier != "" {
		r.DefaultTier = k.DefaultTier
	}
	if k.PreferCarbon {
		r.Prefers = "carbon"
	}
	if k.Limit != nil {
		r.Limit = money.FormatPrecisePico(*k.Limit) + " per " + string(k.LimitPeriod)
		r.LimitUSD = strings.TrimPrefix(k.Limit.String(), "$")
	}
	if u.Remaining != nil {
		r.Remaining = money.FormatPrecise(*u.Remaining)
	}
	if k.LastUsedAt != nil {
		r.LastUsed = core.MomentIn(loc, *k.LastUsedAt, core.ToMinute)
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
	ID          string  `json:"id"`
	Key         string  `json:"key,omitempty"`
	Name        string  `json:"name"`
	Prefix      string  `json:"prefix"`
	LimitUSD    *string `json:"limit_usd"`    // exact decimal dollars; null: no limit
	LimitPeriod string  `json:"limit_period"` // day, week or month
	// MonthlyLimitUSD is limit_usd again, for the clients of before periods, when the period is
	// a month; absent otherwise. Deprecated (docs/api.md).
	MonthlyLimitUSD json.RawMessage `json:"monthly_limit_usd,omitempty"`
	// What the key was billed in its limit's period (the month without a limit), what remains of
	// the limit (absent without one) and when the period ends (docs/budgets.md); in GET /api/keys.
	SpentPico     *money.BigPico `json:"spent_in_period_pico,omitempty"`
	SpentUSD      string         `json:"spent_in_period_usd,omitempty"`
	RemainingPico *money.BigPico `json:"remaining_pico,omitempty"`
	RemainingUSD  string         `json:"remaining_usd,omitempty"`
	ResetsAt      *time.Time     `json:"resets_at,omitempty"`
	DefaultTier   *string        `json:"default_tier"` // null: the gateway's default
	Prefer        string         `json:"prefer"`       // price or carbon
	Status        string         `json:"status"`       // live or revoked
	CreatedAt     time.Time      `json:"created_at"`
	LastUsedAt    *time.Time     `json:"last_used_at"`
	RevokedAt     *time.Time     `json:"revoked_at"`
}

func keyView(k accounts.APIKey) keyJSON {
	v := keyJSON{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Status: keyStatus(k), CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, Prefer: "price", LimitPeriod: string(k.LimitPeriod)}
	if k.PreferCarbon {
		v.Prefer = "carbon"
	}
	if k.Limit != nil {
		usd := strings.TrimPrefix(k.Limit.String(), "$")
		v.LimitUSD = &usd
	}
	if k.LimitPeriod == periods.Month {
		v.MonthlyLimitUSD, _ = json.Marshal(v.LimitUSD) // never fails
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
		LimitUSD    json.RawMessage `json:"limit_usd"`
		LimitPeriod string          `json:"limit_period"`
		// Deprecated: limit_usd per month (docs/api.md).
		MonthlyLimitUSD json.RawMessage `json:"monthly_limit_usd"`
		DefaultTier     string          `json:"default_tier"`
		Prefer          string          `json:"prefer"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := monthlyLimit(in.MonthlyLimitUSD, &in.LimitUSD, &in.LimitPeriod); err != nil {
		return err
	}
	k, secret, err := s.createKey(c, in.Name, core.JSONText(in.LimitUSD), in.LimitPeriod, in.DefaultTier, in.Prefer)
	if err != nil {
		return err
	}
	showSecretOnce(c)
	v := keyView(k)
	v.Key = secret
	return c.JSON(http.StatusCreated, v)
}

func (s *Server) apiKeys(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	keys, err := s.Accounts.Keys(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	usages, err := s.keyUsages(c, keys)
	if err != nil {
		return err
	}
	out := make([]keyJSON, 0, len(keys))
	for _, u := range usages {
		v := keyView(u.Key)
		if s.budgets != nil {
			spent, resets := u.InPeriod, u.ResetsAt
			v.SpentPico, v.SpentUSD, v.ResetsAt = &spent, strings.TrimPrefix(spent.String(), "$"), &resets
			if u.Remaining != nil {
				v.RemainingPico, v.RemainingUSD = u.Remaining, strings.TrimPrefix(u.Remaining.String(), "$")
			}
		}
		out = append(out, v)
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out, "count": len(out)})
}

func (s *Server) apiRevokeKey(c echo.Context) error {
	if err := s.revokeKey(c, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// monthlyLimit reads the deprecated monthly_limit_usd, the field of before limits had periods,
// as limit_usd per month, so that an old client sets the limit it always set. Given beside
// limit_usd, or with another period, it is refused: the two would disagree.
func monthlyLimit(monthly json.RawMessage, limit *json.RawMessage, period *string) error {
	if monthly == nil {
		return nil
	}
	if *limit != nil {
		return fieldError("monthly_limit_usd", "Send limit_usd with limit_period, or the older monthly_limit_usd, not both.")
	}
	if p := strings.TrimSpace(*period); p != "" && p != string(periods.Month) {
		return fieldError("monthly_limit_usd", "monthly_limit_usd is a limit per month; for another period send limit_usd with limit_period.")
	}
	*limit, *period = monthly, string(periods.Month)
	return nil
}

// apiUpdateKey changes a key: PATCH /api/keys/{id} {"limit_usd": "12.50", "limit_period": "day"},
// or null for no limit; the period is a month unless given. The amount is required, so that an
// empty body changes nothing by mistake.
func (s *Server) apiUpdateKey(c echo.Context) error {
	var in struct {
		// A string or a number, read as its exact text; null removes the limit.
		LimitUSD    json.RawMessage `json:"limit_usd"`
		LimitPeriod string          `json:"limit_period"`
		// Deprecated: limit_usd per month (docs/api.md).
		MonthlyLimitUSD json.RawMessage `json:"monthly_limit_usd"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := monthlyLimit(in.MonthlyLimitUSD, &in.LimitUSD, &in.LimitPeriod); err != nil {
		return err
	}
	period, problem := parseKeyPeriod(in.LimitPeriod)
	if problem != "" {
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"limit_period": problem}}
	}
	limit, err := jsonLimit(in.LimitUSD, "limit_usd")
	if err != nil {
		return err
	}
	k, err := s.setKeyLimit(c, c.Param("id"), limit, period)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, keyView(k))
}
