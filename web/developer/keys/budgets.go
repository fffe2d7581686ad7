package keys

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The budgets page (/budgets): each person's limit on the keys they created, the account's
// monthly budget, and the balance alert (docs/budgets.md).

// needsBudgets answers 503 where the budgets service is not wired.
func (s *Server) needsBudgets(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.budgets == nil {
			return services.Errorf(services.CodeUnavailable, "Budgets are not available in this process.")
		}
		return next(c)
	}
}

func (s *Server) budgetsPage(c echo.Context) error {
	return s.renderBudgets(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderBudgets(c echo.Context, status int, form templates.Form) error {
	sess, _ := core.CurrentSession(c)
	o, err := s.budgets.Overview(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	p := templates.BudgetsPage{Page: s.Page(c, "Budgets"), Periods: keyPeriodOptions(), Form: form}
	for _, u := range o.People {
		p.People = append(p.People, templates.Option{Value: u.ID, Label: u.Email})
	}
	for _, m := range o.Members {
		p.Members = append(p.Members, templates.MemberLimitRow{UserID: m.UserID, Email: m.Email,
			Limit: money.FormatPrecisePico(m.Limit), Period: string(m.Period), Spent: money.FormatPrecise(m.Spent),
			Remaining: remaining(m.Limit, m.Spent), Thresholds: thresholdText(m.Thresholds)})
	}
	if p.Form.Values == nil {
		// The forms start from what is set.
		keys, err := s.budgets.KeyThresholds(c.Request().Context(), sess.User.AccountID)
		if err != nil {
			return err
		}
		p.Form.Values = map[string]string{"limit_period": "month", "key_thresholds": thresholdText(keys)}
		if b := o.Budget; b != nil {
			p.Form.Values["budget_usd"] = strings.TrimPrefix(b.Limit.String(), "$")
			p.Form.Values["budget_thresholds"] = thresholdText(b.Thresholds)
		}
	}
	if b := o.Budget; b != nil {
		p.Budget = &templates.BudgetRow{Limit: money.FormatPrecisePico(b.Limit), Spent: money.FormatPrecise(b.Spent),
			Remaining: remaining(b.Limit, b.Spent), Thresholds: thresholdText(b.Thresholds)}
	}
	// Without a choice of their own, a person gets the account-wide alerts, and a key's or their
	// own limit's: the page shows that as on.
	p.BudgetMail, p.CreditLowMail = true, true
	if v, ok := o.Subscriptions[budgets.KindBudget][sess.User.ID]; ok {
		p.BudgetMail = v
	}
	if v, ok := o.Subscriptions[budgets.KindCreditLow][sess.User.ID]; ok {
		p.CreditLowMail = v
	}
	if o.CreditLowBelow != nil {
		p.CreditLowUSD = strings.TrimPrefix(o.CreditLowBelow.String(), "$")
	}
	return s.Render(c, status, templates.Budgets(p))
}

// remaining is a limit less its spend, never below zero.
func remaining(limit money.Pico, spent money.BigPico) string {
	return money.FormatPrecise(left(limit, spent))
}

func thresholdText(t []int) string {
	parts := make([]string, len(t))
	for i, v := range t {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ", ")
}

// parseThresholds reads "50, 80, 100"; it returns what is wrong, or "".
func parseThresholds(v string) ([]int, string) {
	var out []int
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '%' }) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, "Give percentages such as 50, 80, 100."
		}
		out = append(out, n)
	}
	return out, ""
}

// budgetFormError renders the page again with the form's values and the error beside its field.
func (s *Server) budgetFormError(c echo.Context, err error, fields ...string) error {
	return s.FormError(c, err, func(f templates.Form) error {
		f.Values = core.Submitted(c, fields...)
		return s.renderBudgets(c, core.StatusFor(err), f)
	})
}

func fieldError(field, problem string) error {
	return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
		Fields: map[string]string{field: problem}}
}

func (s *Server) memberLimitSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	fields := []string{"user_id", "limit_usd", "limit_period", "thresholds"}
	limit, problem := parseKeyLimit(c.FormValue("limit_usd"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("limit_usd", problem), fields...)
	}
	period, problem := parseKeyPeriod(c.FormValue("limit_period"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("limit_period", problem), fields...)
	}
	thresholds, problem := parseThresholds(c.FormValue("thresholds"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("thresholds", problem), fields...)
	}
	err := s.budgets.SetMemberLimit(c.Request().Context(), sess.User.AccountID, c.FormValue("user_id"), limit, period, thresholds)
	if services.ErrorCode(err) == services.CodeInvalid {
		return s.budgetFormError(c, err, fields...)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/budgets?flash=member-limit-set")
}

func (s *Server) accountBudgetSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	fields := []string{"budget_usd", "budget_thresholds"}
	limit, problem := parseKeyLimit(c.FormValue("budget_usd"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("budget_usd", problem), fields...)
	}
	thresholds, problem := parseThresholds(c.FormValue("budget_thresholds"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("budget_thresholds", problem), fields...)
	}
	err := s.budgets.SetAccountBudget(c.Request().Context(), sess.User.AccountID, limit, thresholds)
	if services.ErrorCode(err) == services.CodeInvalid {
		return s.budgetFormError(c, err, fields...)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/budgets?flash=budget-set")
}

// creditLowSubmit sets the alerts the page's forms post: the balance alert (credit_low_usd) and
// the thresholds of every key's limit (key_thresholds), each only when its form sent it.
func (s *Server) creditLowSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	if _, ok := form["key_thresholds"]; ok {
		thresholds, problem := parseThresholds(c.FormValue("key_thresholds"))
		if problem != "" {
			return s.budgetFormError(c, fieldError("key_thresholds", problem), "key_thresholds")
		}
		err := s.budgets.SetKeyThresholds(c.Request().Context(), sess.User.AccountID, thresholds)
		if services.ErrorCode(err) == services.CodeInvalid {
			return s.budgetFormError(c, err, "key_thresholds")
		}
		if err != nil {
			return err
		}
		if _, ok := form["credit_low_usd"]; !ok {
			return c.Redirect(http.StatusSeeOther, "/budgets?flash=alert-set")
		}
	}
	below, problem := parseKeyLimit(c.FormValue("credit_low_usd"))
	if problem != "" {
		return s.budgetFormError(c, fieldError("credit_low_usd", problem), "credit_low_usd")
	}
	if err := s.budgets.SetCreditLowAlert(c.Request().Context(), sess.User.AccountID, below); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/budgets?flash=alert-set")
}

// subscriptionsSubmit records whether the signed-in person gets the budget and the balance
// alerts' e-mail.
func (s *Server) subscriptionsSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	for kind, field := range map[string]string{budgets.KindBudget: "budget", budgets.KindCreditLow: "credit_low"} {
		if err := s.budgets.SetSubscription(ctx, sess.User.AccountID, sess.User.ID, kind, c.FormValue(field) == "on"); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, "/budgets?flash=subscriptions-set")
}
