package keys

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The budgets in JSON (docs/api.md): each person's limit, the account's monthly budget and the
// alert settings, with the same service calls and role rules as the budgets page. Amounts are
// the API's: picodollars (*_pico) beside exact decimal dollars (*_usd); a limit is set in
// dollars and cents, as a string or a number, and null removes it.

type memberLimitJSON struct {
	UserID        string        `json:"user_id"`
	Email         string        `json:"email"`
	LimitPico     money.BigPico `json:"limit_pico"`
	LimitUSD      string        `json:"limit_usd"`
	LimitPeriod   string        `json:"limit_period"`
	Thresholds    []int         `json:"thresholds"`
	SpentPico     money.BigPico `json:"spent_in_period_pico"`
	SpentUSD      string        `json:"spent_in_period_usd"`
	RemainingPico money.BigPico `json:"remaining_pico"`
	RemainingUSD  string        `json:"remaining_usd"`
}

type accountBudgetJSON struct {
	LimitPico     money.BigPico `json:"limit_pico"`
	LimitUSD      string        `json:"limit_usd"`
	Thresholds    []int         `json:"thresholds"`
	SpentPico     money.BigPico `json:"spent_this_month_pico"`
	SpentUSD      string        `json:"spent_this_month_usd"`
	RemainingPico money.BigPico `json:"remaining_pico"`
	RemainingUSD  string        `json:"remaining_usd"`
}

// alertsJSON is the account's alert settings, and the caller's own choice of alert e-mails.
type alertsJSON struct {
	CreditLowPico *money.BigPico `json:"credit_low_pico"` // null: no balance alert
	CreditLowUSD  *string        `json:"credit_low_usd"`
	KeyThresholds []int          `json:"key_thresholds"`
	// Whether the caller is e-mailed the budget alerts and the balance alert.
	BudgetMail    bool `json:"budget_mail"`
	CreditLowMail bool `json:"credit_low_mail"`
}

func usdText(b money.BigPico) string { return strings.TrimPrefix(b.String(), "$") }

// left is a limit less its spend, never below zero.
func left(limit money.Pico, spent money.BigPico) money.BigPico {
	r := money.BigPicoOf(limit).Add(spent.Neg())
	if r.Sign() < 0 {
		return money.BigPicoOf(0)
	}
	return r
}

func memberLimitView(m budgets.MemberLimit) memberLimitJSON {
	l, r := money.BigPicoOf(m.Limit), left(m.Limit, m.Spent)
	return memberLimitJSON{UserID: m.UserID, Email: m.Email, LimitPico: l, LimitUSD: usdText(l), LimitPeriod: string(m.Period),
		Thresholds: m.Thresholds, SpentPico: m.Spent, SpentUSD: usdText(m.Spent), RemainingPico: r, RemainingUSD: usdText(r)}
}

func accountBudgetView(b *budgets.AccountBudget) *accountBudgetJSON {
	if b == nil {
		return nil
	}
	l, r := money.BigPicoOf(b.Limit), left(b.Limit, b.Spent)
	return &accountBudgetJSON{LimitPico: l, LimitUSD: usdText(l), Thresholds: b.Thresholds, SpentPico: b.Spent,
		SpentUSD: usdText(b.Spent), RemainingPico: r, RemainingUSD: usdText(r)}
}

// overview is the account's budgets as the caller sees them.
func (s *Server) overview(c echo.Context) (budgets.Overview, alertsJSON, error) {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	o, err := s.budgets.Overview(ctx, sess.User.AccountID)
	if err != nil {
		return budgets.Overview{}, alertsJSON{}, err
	}
	a := alertsJSON{BudgetMail: true, CreditLowMail: true}
	if a.KeyThresholds, err = s.budgets.KeyThresholds(ctx, sess.User.AccountID); err != nil {
		return budgets.Overview{}, alertsJSON{}, err
	}
	if o.CreditLowBelow != nil {
		b := money.BigPicoOf(*o.CreditLowBelow)
		usd := usdText(b)
		a.CreditLowPico, a.CreditLowUSD = &b, &usd
	}
	if v, ok := o.Subscriptions[budgets.KindBudget][sess.User.ID]; ok {
		a.BudgetMail = v
	}
	if v, ok := o.Subscriptions[budgets.KindCreditLow][sess.User.ID]; ok {
		a.CreditLowMail = v
	}
	return o, a, nil
}

// apiBudgets is GET /api/budgets: every member limit, the account budget and the alerts.
func (s *Server) apiBudgets(c echo.Context) error {
	o, a, err := s.overview(c)
	if err != nil {
		return err
	}
	members := make([]memberLimitJSON, 0, len(o.Members))
	for _, m := range o.Members {
		members = append(members, memberLimitView(m))
	}
	return c.JSON(http.StatusOK, map[string]any{"member_limits": members, "account_budget": accountBudgetView(o.Budget),
		"alerts": a, "as_of": s.Now().UTC().Truncate(time.Second)})
}

// jsonLimit reads a required amount of a JSON body: dollars and cents as a string or a number,
// or null for none (nil). A problem is told beside the field.
func jsonLimit(raw json.RawMessage, field string) (*money.Pico, error) {
	switch strings.TrimSpace(string(raw)) {
	case "":
		return nil, fieldError(field, `Required: dollars and cents such as "12.50", or null for no limit.`)
	case "null":
		return nil, nil
	}
	text := core.JSONText(raw)
	if strings.TrimSpace(text) == "" {
		return nil, fieldError(field, `Enter dollars and cents such as "12.50", or null for no limit.`)
	}
	limit, problem := parseKeyLimit(text)
	if problem != "" {
		return nil, fieldError(field, problem)
	}
	return limit, nil
}

// apiSetMemberLimit is PUT /api/budgets/members/{user id}
// {"limit_usd": "25.00", "limit_period": "week", "thresholds": [50, 90]}; null removes the limit.
func (s *Server) apiSetMemberLimit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	var in struct {
		LimitUSD    json.RawMessage `json:"limit_usd"`
		LimitPeriod string          `json:"limit_period"`
		Thresholds  []int           `json:"thresholds"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	limit, err := jsonLimit(in.LimitUSD, "limit_usd")
	if err != nil {
		return err
	}
	period, problem := parseKeyPeriod(in.LimitPeriod)
	if problem != "" {
		return fieldError("limit_period", problem)
	}
	userID := c.Param("id")
	if err := s.budgets.SetMemberLimit(c.Request().Context(), sess.User.AccountID, userID, limit, period, in.Thresholds); err != nil {
		return err
	}
	o, _, err := s.overview(c)
	if err != nil {
		return err
	}
	for _, m := range o.Members {
		if m.UserID == userID {
			return c.JSON(http.StatusOK, memberLimitView(m))
		}
	}
	return c.NoContent(http.StatusNoContent) // removed
}

// apiSetAccountBudget is PUT /api/budgets/account {"budget_usd": "500.00", "budget_thresholds":
// [50, 80, 100]}, the names of the page's form; null removes the budget.
func (s *Server) apiSetAccountBudget(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	var in struct {
		BudgetUSD  json.RawMessage `json:"budget_usd"`
		Thresholds []int           `json:"budget_thresholds"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	limit, err := jsonLimit(in.BudgetUSD, "budget_usd")
	if err != nil {
		return err
	}
	if err := s.budgets.SetAccountBudget(c.Request().Context(), sess.User.AccountID, limit, in.Thresholds); err != nil {
		return err
	}
	o, _, err := s.overview(c)
	if err != nil {
		return err
	}
	if o.Budget == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return c.JSON(http.StatusOK, accountBudgetView(o.Budget))
}

func (s *Server) apiAlerts(c echo.Context) error {
	_, a, err := s.overview(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// apiSetAlerts is PUT /api/budgets/alerts {"credit_low_usd": "10.00", "key_thresholds": [80, 85,
// 95]}: the balance under which the account is alerted (null: none), and the percentages of a
// key's limit at which it is (empty: 50, 80, 100). A field left out is left as it is.
func (s *Server) apiSetAlerts(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	var in struct {
		CreditLowUSD  json.RawMessage `json:"credit_low_usd"`
		KeyThresholds *[]int          `json:"key_thresholds"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	// Both are checked before either is stored.
	var below *money.Pico
	if in.CreditLowUSD != nil {
		var err error
		if below, err = jsonLimit(in.CreditLowUSD, "credit_low_usd"); err != nil {
			return err
		}
	}
	if in.KeyThresholds != nil && len(*in.KeyThresholds) > 0 {
		if _, err := budgets.ValidateKeyThresholds(*in.KeyThresholds); err != nil {
			return err
		}
	}
	if in.CreditLowUSD != nil {
		if err := s.budgets.SetCreditLowAlert(ctx, sess.User.AccountID, below); err != nil {
			return err
		}
	}
	if in.KeyThresholds != nil {
		if err := s.budgets.SetKeyThresholds(ctx, sess.User.AccountID, *in.KeyThresholds); err != nil {
			return err
		}
	}
	return s.apiAlerts(c)
}

// apiSetSubscriptions is PUT /api/budgets/subscriptions {"budget_mail": true, "credit_low_mail":
// false}: whether the caller is e-mailed each kind of alert. A field left out is left as it is.
func (s *Server) apiSetSubscriptions(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	var in struct {
		BudgetMail    *bool `json:"budget_mail"`
		CreditLowMail *bool `json:"credit_low_mail"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	for kind, v := range map[string]*bool{budgets.KindBudget: in.BudgetMail, budgets.KindCreditLow: in.CreditLowMail} {
		if v == nil {
			continue
		}
		if err := s.budgets.SetSubscription(ctx, sess.User.AccountID, sess.User.ID, kind, *v); err != nil {
			return err
		}
	}
	return s.apiAlerts(c)
}
