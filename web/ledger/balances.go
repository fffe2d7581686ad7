package ledger

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Every account's balance, and the adjustments finance posts to a customer's credit.

var accountKindLabels = map[ledger.AccountKind]string{
	ledger.AccountCustomerCredit:  "customer credit",
	ledger.AccountProviderPayable: "provider payable",
	ledger.AccountPlatformRevenue: "platform revenue",
	ledger.AccountStripeClearing:  "Stripe clearing",
}

// flagged reports a balance finance must look at: a customer's credit below zero, left by a
// refund or by usage recorded after the credit ran out. Stripe clearing is negative by design.
func flagged(b ledger.AccountBalance) bool {
	return b.Kind == ledger.AccountCustomerCredit && b.Balance.Sign() < 0
}

// adjust records a manual adjustment by the logged-in user. The amount is signed dollars,
// exact to the picodollar; the credits service checks the account and the reason.
func (s *Server) adjust(c echo.Context, accountID, amountUSD, reason string) (ledger.Transaction, error) {
	amount, err := money.ParseUSD(amountUSD)
	if err != nil {
		return ledger.Transaction{}, core.FieldError("amount_usd", "Enter dollars, like 25.00 to grant credit or -5.00 to take it back.")
	}
	sess, _ := core.CurrentSession(c)
	txn, err := s.Payments.Credits.Adjust(c.Request().Context(), credits.AdjustInput{
		AccountID: strings.TrimSpace(accountID), Amount: amount, Reason: reason, ByUserID: sess.User.ID,
	})
	if services.ErrorCode(err) == services.CodeNotFound {
		// The only thing an adjustment looks up is the account it names.
		return ledger.Transaction{}, core.FieldError("account_id", "There is no such account.")
	}
	return txn, err
}

func (s *Server) balancesPage(c echo.Context) error {
	return s.renderBalances(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderBalances(c echo.Context, status int, form templates.Form) error {
	ctx := c.Request().Context()
	balances, err := s.Payments.Ledger.Balances(ctx)
	if err != nil {
		return err
	}
	users, err := s.Accounts.ListUsers(ctx)
	if err != nil {
		return err
	}
	p := templates.BalancesPage{Page: s.Page(c, "Balances"), Form: form, Customers: customerOptions(users, balances)}
	for _, b := range balances {
		owner := b.OwnerName
		if b.OwnerAccountID == "" {
			owner = "gpumarket (platform)"
		}
		p.Accounts = append(p.Accounts, templates.AccountBalanceRow{Account: string(b.Account), Kind: accountKindLabels[b.Kind],
			Owner: owner, Balance: money.FormatBigCents(b.Balance), Negative: flagged(b)})
	}
	return s.Render(c, status, templates.Balances(p))
}

// customerOptions lists the accounts an adjustment is usually for: every developer's, and
// every account that already holds credit. Each is labelled by its organisation's name where
// the ledger knows it, and by a user's email.
func customerOptions(users []accounts.User, balances []ledger.AccountBalance) []templates.Option {
	names := map[string]string{} // accounts holding credit, by id
	for _, b := range balances {
		if b.Kind == ledger.AccountCustomerCredit {
			names[b.OwnerAccountID] = b.OwnerName
		}
	}
	labels := map[string]string{}
	for _, u := range users {
		name, holdsCredit := names[u.AccountID]
		if _, seen := labels[u.AccountID]; seen || (!holdsCredit && u.Role != accounts.RoleDeveloper) {
			continue
		}
		labels[u.AccountID] = strings.TrimPrefix(name+" · "+u.Email, " · ")
	}
	for id, name := range names {
		if _, ok := labels[id]; !ok {
			labels[id] = name
		}
	}
	out := make([]templates.Option, 0, len(labels)+1)
	out = append(out, templates.Option{Value: "", Label: "Choose an account"})
	for id, label := range labels {
		out = append(out, templates.Option{Value: id, Label: label})
	}
	slices.SortFunc(out[1:], func(a, b templates.Option) int { return cmp.Compare(a.Label, b.Label) })
	return out
}

func (s *Server) adjustmentSubmit(c echo.Context) error {
	formError := func(err error) error {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = core.Submitted(c, "account_id", "amount_usd", "reason")
			return s.renderBalances(c, core.StatusFor(err), f)
		})
	}
	conf, err := s.adjustmentConfirmation(c)
	if err != nil {
		return formError(err)
	}
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Adjust a balance", conf)
	}
	if _, err := s.adjust(c, c.FormValue("account_id"), c.FormValue("amount_usd"), c.FormValue("reason")); err != nil {
		return formError(err)
	}
	return c.Redirect(http.StatusSeeOther, "/finance/balances?flash=adjusted")
}

// adjustmentConfirmation is the page that says what an adjustment moves before it is made
// (core.Confirmation): from platform revenue to the customer's credit or back, the balance before and
// after. It binds the balance as it is, so a confirmation posted twice adjusts once: the first
// changes the balance, and the second no longer matches it.
func (s *Server) adjustmentConfirmation(c echo.Context) (core.Confirmation, error) {
	accountID, reason := strings.TrimSpace(c.FormValue("account_id")), strings.TrimSpace(c.FormValue("reason"))
	fe := services.FieldErrors{}
	amount, err := money.ParseUSD(c.FormValue("amount_usd"))
	if err != nil || amount == 0 {
		fe.Add("amount_usd", "Enter dollars, like 25.00 to grant credit or -5.00 to take it back.")
	}
	if reason == "" {
		fe.Add("reason", "Say why: the reason is kept with the adjustment.")
	}
	if err := fe.Err(); err != nil {
		return core.Confirmation{}, err
	}
	// The credit's balance first: it opens the account's credit when it has none yet, and
	// finds no account that does not exist.
	ctx := c.Request().Context()
	if _, err := s.Payments.Credits.Balance(ctx, accountID); err != nil {
		if code := services.ErrorCode(err); code == services.CodeNotFound || code == services.CodeInvalid {
			return core.Confirmation{}, core.FieldError("account_id", "There is no such account.")
		}
		return core.Confirmation{}, err
	}
	balances, err := s.Payments.Ledger.Balances(ctx)
	if err != nil {
		return core.Confirmation{}, err
	}
	var held *ledger.AccountBalance
	for i, b := range balances {
		if b.Kind == ledger.AccountCustomerCredit && b.OwnerAccountID == accountID {
			held = &balances[i]
		}
	}
	if held == nil {
		return core.Confirmation{}, core.FieldError("account_id", "There is no such account.")
	}
	after := held.Balance.AddPico(amount)
	size, verb, button := money.FormatPrecisePico(amount), "Grants", "Grant "
	what := fmt.Sprintf("%s %s of credit to %s", verb, size, held.OwnerName)
	if amount < 0 {
		size, verb, button = money.FormatPrecisePico(-amount), "Takes back", "Take back "
		what = fmt.Sprintf("%s %s of credit from %s", verb, size, held.OwnerName)
	}
	return core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Adjust the credit of " + held.OwnerName,
		Consequences: []string{
			fmt.Sprintf("%s: the balance goes from %s to %s.", what, money.FormatBigCents(held.Balance), money.FormatBigCents(after)),
			"The money moves between the customer's credit and platform revenue at once. It cannot be undone; another adjustment can reverse it.",
			"It is recorded in the audit log with your name and the reason: " + reason,
		},
		Button: button + size, Action: "/finance/adjustments", Back: "/finance/balances",
		Hidden: core.HiddenFields(c, "account_id", "amount_usd", "reason")},
		Binds: []string{"adjust", accountID, fmt.Sprint(int64(amount)), reason, held.Balance.Decimal(12)}}, nil
}
