package ledger

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// stripeEventsShown is how many of the latest Stripe events the audit page lists.
const stripeEventsShown = 100

var accountKindLabels = map[billing.AccountKind]string{
	billing.AccountCustomerCredit:  "customer credit",
	billing.AccountProviderPayable: "provider payable",
	billing.AccountPlatformRevenue: "platform revenue",
	billing.AccountStripeClearing:  "Stripe clearing",
}

// flagged reports a balance finance must look at: a customer's credit below zero, left by a
// refund or by usage recorded after the credit ran out. Stripe clearing is negative by design.
func flagged(b billing.AccountBalance) bool {
	return b.Kind == billing.AccountCustomerCredit && b.Balance.Sign() < 0
}

// Balances and adjustments.

// adjust records a manual adjustment by the logged-in user. The amount is signed dollars,
// exact to the picodollar; the credits service checks the account and the reason.
func (s *Server) adjust(c echo.Context, accountID, amountUSD, reason string) (billing.Transaction, error) {
	amount, err := money.ParseUSD(amountUSD)
	if err != nil {
		return billing.Transaction{}, core.FieldError("amount_usd", "Enter dollars, like 25.00 to grant credit or -5.00 to take it back.")
	}
	sess, _ := core.CurrentSession(c)
	txn, err := s.Payments.Credits.Adjust(c.Request().Context(), billing.AdjustInput{
		AccountID: strings.TrimSpace(accountID), Amount: amount, Reason: reason, ByUserID: sess.User.ID,
	})
	if services.ErrorCode(err) == services.CodeNotFound {
		// The only thing an adjustment looks up is the account it names.
		return billing.Transaction{}, core.FieldError("account_id", "There is no such account.")
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
func customerOptions(users []accounts.User, balances []billing.AccountBalance) []templates.Option {
	names := map[string]string{} // accounts holding credit, by id
	for _, b := range balances {
		if b.Kind == billing.AccountCustomerCredit {
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
	var held *billing.AccountBalance
	for i, b := range balances {
		if b.Kind == billing.AccountCustomerCredit && b.OwnerAccountID == accountID {
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

// Price book.

// timeFormat is how a request writes a moment.
type timeFormat struct {
	layouts []string
	example string // shown when a value does not parse
}

var (
	// datetimeLocal is what a page's datetime-local field sends, read as UTC.
	datetimeLocal = timeFormat{layouts: []string{"2006-01-02T15:04", "2006-01-02T15:04:05"}, example: "2026-12-01T00:00"}
	rfc3339       = timeFormat{layouts: []string{time.RFC3339}, example: "2026-12-01T00:00:00Z"}
)

func (f timeFormat) parse(s string) (time.Time, bool) {
	for _, l := range f.layouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// priceChange reads a price change from text values and reports every problem at once: what
// does not parse, and what breaks the price book's rules (a date in the past among them).
// free marks a $0 price as meant; an empty model changes the tier's default; an empty cached price takes the
// default, a quarter of the input price.
func priceChange(tier, model, input, output, cached, effectiveFrom string, free bool, when timeFormat, now time.Time) (catalog.ScheduleInput, error) {
	fe := services.FieldErrors{}
	in := catalog.ScheduleInput{Tier: catalog.Tier(strings.TrimSpace(tier)), Model: strings.TrimSpace(model), Free: free}
	for _, p := range []struct {
		field, text string
		into        *money.MicroUSD
	}{{"input_usd_per_mtok", input, &in.Input}, {"output_usd_per_mtok", output, &in.Output}} {
		m, err := money.ParseMicroUSD(p.text)
		if err != nil {
			fe.Add(p.field, "Enter dollars per million tokens, like 0.15.")
		}
		*p.into = m
	}
	if v := strings.TrimSpace(cached); v != "" {
		m, err := money.ParseMicroUSD(v)
		if err != nil {
			fe.Add("cached_input_usd_per_mtok", "Enter dollars per million tokens, like 0.0375, or leave it empty for a quarter of the input price.")
		}
		in.CachedInput = &m
	}
	if v := strings.TrimSpace(effectiveFrom); v != "" {
		t, ok := when.parse(v)
		if !ok {
			fe.Add("effective_from", "Enter a date and time in UTC, like "+when.example+".")
		}
		in.EffectiveFrom = t
	}
	if err := in.Validate(now); err != nil {
		if ae, ok := err.(*services.Error); ok {
			for k, v := range ae.Fields {
				fe.Add(k, v)
			}
		}
	}
	return in, fe.Err()
}

// priceStatus says where a row of the price book stands at now: in force for its tier's default or
// its model, scheduled, or superseded by a later row of the same.
func priceStatus(ch catalog.PriceChange, book catalog.PriceBook, now time.Time) string {
	cur, ok := book.At(ch.Tier, ch.Model, now)
	switch {
	case ok && cur.ID == ch.ID:
		return "in force"
	case ch.EffectiveFrom.After(now):
		return "scheduled"
	}
	return "superseded"
}

func (s *Server) pricesPage(c echo.Context) error {
	// The form suggests the next midnight, UTC.
	next := s.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return s.renderPrices(c, http.StatusOK, templates.Form{Values: map[string]string{
		"tier": string(catalog.TierStandard), "effective_from": next.Format(datetimeLocal.layouts[0]),
	}})
}

func (s *Server) renderPrices(c echo.Context, status int, form templates.Form) error {
	ctx := c.Request().Context()
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	history, err := s.catalog.PriceHistory(ctx)
	if err != nil {
		return err
	}
	now := s.Now()
	p := templates.PricesPage{Page: s.Page(c, "Price book"), Form: form}
	for _, t := range catalog.Tiers {
		p.Tiers = append(p.Tiers, templates.Option{Value: string(t), Label: string(t)})
	}
	for _, pr := range core.PricesInTierOrder(book, now) {
		p.Current = append(p.Current, templates.PriceRow{Tier: string(pr.Tier), Model: pr.Model, Input: pr.Input.String(), Output: pr.Output.String(),
			CachedInput: pr.CachedInput.String(), EffectiveFrom: pr.EffectiveFrom.UTC().Format(core.MinuteUTC)})
	}
	for _, ch := range history {
		by := ch.CreatedBy
		if by == "" {
			by = "platform default"
		}
		p.History = append(p.History, templates.PriceChangeRow{Tier: string(ch.Tier), Model: ch.Model, Input: ch.Input.String(), Output: ch.Output.String(),
			CachedInput: ch.CachedInput.String(), EffectiveFrom: ch.EffectiveFrom.UTC().Format(core.MinuteUTC), ScheduledBy: by, ScheduledAt: ch.CreatedAt.UTC().Format(core.MinuteUTC),
			Status: priceStatus(ch, book, now)})
	}
	return s.Render(c, status, templates.Prices(p))
}

func (s *Server) schedulePrice(c echo.Context, in catalog.ScheduleInput) (catalog.PriceChange, error) {
	sess, _ := core.CurrentSession(c)
	ch, err := s.catalog.SchedulePrice(c.Request().Context(), sess.User.ID, in)
	if err != nil {
		return catalog.PriceChange{}, err
	}
	ch.CreatedBy = sess.User.Email // as PriceHistory names who scheduled it
	return ch, nil
}

func (s *Server) priceSubmit(c echo.Context) error {
	in, err := priceChange(c.FormValue("tier"), c.FormValue("model"), c.FormValue("input_usd_per_mtok"), c.FormValue("output_usd_per_mtok"),
		c.FormValue("cached_input_usd_per_mtok"),
		c.FormValue("effective_from"), c.FormValue(catalog.FieldFree) != "", datetimeLocal, s.Now())
	if err == nil {
		_, err = s.schedulePrice(c, in)
	}
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = core.Submitted(c, "tier", "model", "input_usd_per_mtok", "output_usd_per_mtok", "cached_input_usd_per_mtok", "effective_from",
				catalog.FieldFree)
			return s.renderPrices(c, core.StatusFor(err), f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/finance/prices?flash=price-scheduled")
}

// Stripe events.

func (s *Server) stripeEventsPage(c echo.Context) error {
	events, err := s.Payments.Webhook.RecentEvents(c.Request().Context(), stripeEventsShown)
	if err != nil {
		return err
	}
	p := templates.StripeEventsPage{Page: s.Page(c, "Stripe events"), Limit: stripeEventsShown}
	for _, ev := range events {
		p.Events = append(p.Events, templates.StripeEventRow{ID: ev.ID, Type: ev.Type, Outcome: ev.Outcome, Deliveries: ev.Deliveries,
			FirstReceived: ev.FirstReceivedAt.UTC().Format(time.DateTime), LastReceived: ev.LastReceivedAt.UTC().Format(time.DateTime)})
	}
	return s.Render(c, http.StatusOK, templates.StripeEvents(p))
}

// Rejected usage events.

func (s *Server) rejectionsPage(c echo.Context) error {
	reason := c.QueryParam("reason")
	report, err := s.usage.Rejections(c.Request().Context(), reason, 200)
	if err != nil {
		return err
	}
	p := templates.RejectionsPage{Page: s.Page(c, "Rejected usage events"), Reason: reason}
	for _, rc := range report.ByReason {
		p.Counts = append(p.Counts, templates.Option{Value: rc.Reason, Label: strconv.FormatInt(rc.Count, 10)})
	}
	for _, g := range report.ByRig {
		p.Rigs = append(p.Rigs, templates.RigRejectionRow{Provider: g.ProviderName, ProviderID: g.ProviderID,
			OfferingID: g.OfferingID, Reason: g.Reason, Count: strconv.FormatInt(g.Count, 10),
			Samples: strconv.FormatInt(g.Samples, 10), Last: g.LastAt.UTC().Format(time.DateTime)})
	}
	for _, ev := range report.Samples {
		p.Events = append(p.Events, templates.RejectionRow{Seq: strconv.FormatInt(ev.StreamSeq, 10),
			Received: ev.ReceivedAt.UTC().Format(time.DateTime), Subject: ev.Subject, EventID: ev.EventID,
			Reason: ev.Reason, Detail: ev.Detail, Raw: ev.Raw})
	}
	return s.Render(c, http.StatusOK, templates.Rejections(p))
}

func (s *Server) apiRejections(c echo.Context) error {
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	report, err := s.usage.Rejections(c.Request().Context(), c.QueryParam("reason"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, report)
}

// JSON API for finance.

type accountBalanceJSON struct {
	LedgerAccountID billing.LedgerAccountID `json:"ledger_account_id"`
	Kind            billing.AccountKind     `json:"kind"`
	OwnerAccountID  string                  `json:"owner_account_id,omitempty"`
	OwnerName       string                  `json:"owner_name,omitempty"`
	BalancePico     money.BigPico           `json:"balance_pico"`
	BalanceUSD      string                  `json:"balance_usd"`
	Negative        bool                    `json:"negative"` // a customer's credit below zero
}

func (s *Server) apiFinanceBalances(c echo.Context) error {
	balances, err := s.Payments.Ledger.Balances(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]accountBalanceJSON, 0, len(balances))
	for _, b := range balances {
		out = append(out, accountBalanceJSON{LedgerAccountID: b.Account, Kind: b.Kind, OwnerAccountID: b.OwnerAccountID,
			OwnerName: b.OwnerName, BalancePico: b.Balance, BalanceUSD: core.USD(b.Balance), Negative: flagged(b)})
	}
	return c.JSON(http.StatusOK, map[string]any{"accounts": out, "unit": "picodollar (1e-12 USD)"})
}

type postingJSON struct {
	LedgerAccountID billing.LedgerAccountID `json:"ledger_account_id"`
	AmountPico      money.Pico              `json:"amount_pico"`
	AmountUSD       string                  `json:"amount_usd"`
}

type transactionJSON struct {
	ID         string                  `json:"id"`
	Kind       billing.TransactionKind `json:"kind"`
	Memo       string                  `json:"memo"`
	CreatedBy  string                  `json:"created_by"`
	OccurredAt time.Time               `json:"occurred_at"`
	CreatedAt  time.Time               `json:"created_at"`
	Postings   []postingJSON           `json:"postings"`
}

func transactionOf(t billing.Transaction) transactionJSON {
	j := transactionJSON{ID: t.ID, Kind: t.Kind, Memo: t.Memo, CreatedBy: t.CreatedBy, OccurredAt: t.OccurredAt, CreatedAt: t.CreatedAt,
		Postings: make([]postingJSON, 0, len(t.Postings))}
	for _, p := range t.Postings {
		j.Postings = append(j.Postings, postingJSON{LedgerAccountID: p.Account, AmountPico: p.Amount, AmountUSD: core.USD(p.Amount)})
	}
	return j
}

func (s *Server) apiAdjust(c echo.Context) error {
	var in struct {
		AccountID string          `json:"account_id"`
		AmountUSD json.RawMessage `json:"amount_usd"` // a string or a number, signed
		Reason    string          `json:"reason"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	txn, err := s.adjust(c, in.AccountID, core.JSONText(in.AmountUSD), in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, transactionOf(txn))
}

func (s *Server) apiFinancePrices(c echo.Context) error {
	ctx := c.Request().Context()
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	history, err := s.catalog.PriceHistory(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"current": core.PricesInTierOrder(book, s.Now()), "history": history})
}

func (s *Server) apiSchedulePrice(c echo.Context) error {
	var body struct {
		Tier   string          `json:"tier"`
		Model  string          `json:"model"`               // empty for the tier's default
		Input  json.RawMessage `json:"input_usd_per_mtok"`  // a string or a number
		Output json.RawMessage `json:"output_usd_per_mtok"` // a string or a number
		// CachedInput is optional, a string or a number: absent, a quarter of the input price.
		CachedInput   json.RawMessage `json:"cached_input_usd_per_mtok"`
		EffectiveFrom string          `json:"effective_from"` // RFC 3339
		Free          bool            `json:"free"`           // a $0 price is meant
	}
	if err := core.DecodeJSON(c, &body); err != nil {
		return err
	}
	in, err := priceChange(body.Tier, body.Model, core.JSONText(body.Input), core.JSONText(body.Output), core.JSONText(body.CachedInput), body.EffectiveFrom,
		body.Free, rfc3339, s.Now())
	if err != nil {
		return err
	}
	ch, err := s.schedulePrice(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ch)
}
