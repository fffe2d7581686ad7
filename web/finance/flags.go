package finance

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Flagged requests: the requests whose rig reported more tokens than were billed, whose
// earnings are held out of their provider's statements until finance releases them or claws
// them back (docs/invoicing.md, "Flags and held earnings"). A document's discrepancy flag
// links here, narrowed to its party and month. Finance also reads every discrepancy the
// gateway and the meter found, the ones that put no money at stake among them.

// flagQuery is the flags page's filter, as its links and forms send it.
type flagQuery struct {
	Period     string `query:"period" form:"period" json:"period"`
	Account    string `query:"account" form:"account" json:"account"`
	Provider   string `query:"provider" form:"provider" json:"provider"`
	Unresolved bool   `query:"unresolved" form:"unresolved" json:"unresolved"`
}

func readFlagQuery(c echo.Context) flagQuery {
	return flagQuery{Period: strings.TrimSpace(c.QueryParam("period")), Account: strings.TrimSpace(c.QueryParam("account")),
		Provider: strings.TrimSpace(c.QueryParam("provider")), Unresolved: c.QueryParam("unresolved") == "1"}
}

func (q flagQuery) filter() (invoicing.FlagFilter, error) {
	f := invoicing.FlagFilter{AccountID: q.Account, ProviderID: q.Provider, Unresolved: q.Unresolved}
	if q.Period != "" {
		p, err := invoicing.ParsePeriod(q.Period)
		if err != nil {
			fe := services.FieldErrors{}
			fe.Add("period", "Use a month like 2026-03.")
			return f, fe.Err()
		}
		f.Period = p
	}
	return f, nil
}

// values is the filter as a query string, for the form to come back to.
func (q flagQuery) values() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"period": q.Period, "account": q.Account, "provider": q.Provider} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Unresolved {
		v.Set("unresolved", "1")
	}
	return v
}

func (s *Server) flagsPage(c echo.Context) error {
	return s.renderFlags(c, http.StatusOK, readFlagQuery(c), templates.Form{})
}

func (s *Server) renderFlags(c echo.Context, status int, q flagQuery, form templates.Form) error {
	p := templates.FlagsPage{Page: s.Page(c, "Flagged requests"), Form: form, Period: q.Period, Account: q.Account,
		Provider: q.Provider, Unresolved: q.Unresolved,
		Back: "/finance/flags"}
	if qs := q.values().Encode(); qs != "" {
		p.Back += "?" + qs
	}
	f, err := q.filter()
	var list []invoicing.FlaggedRequest
	if err == nil {
		list, err = s.invoicing.FlaggedRequests(c.Request().Context(), f)
	}
	if err != nil {
		return s.FormError(c, err, func(fm templates.Form) error {
			p.Form = fm
			return s.Render(c, core.StatusFor(err), templates.Flags(p))
		})
	}
	for _, r := range list {
		row := templates.FlagRow{RequestID: r.RequestID, Occurred: core.Moment(c, r.OccurredAt),
			Period: r.Period.String(), Customer: r.AccountName, Provider: r.ProviderName, Model: r.Model,
			Reported: flagTokens(r.ReportedInput) + " / " + flagTokens(r.ReportedOutput),
			Billed:   flagTokens(r.BilledInput) + " / " + flagTokens(r.BilledOutput),
			Seen:     seenTokens(r.SeenInput) + " / " + seenTokens(r.SeenOutput),
			Excess:   flagTokens(r.ExcessInput) + " / " + flagTokens(r.ExcessOutput),
			Reason:   r.Reason, Charged: invoicing.RequestDollars(r.Charge),
			Earned:     invoicing.RequestDollars(r.Payable),
			Resolution: strings.ReplaceAll(string(r.Resolution), "_", " "), ResolvedBy: r.ResolvedBy, Note: r.Note}
		if r.ResolvedAt != nil {
			row.ResolvedAt = core.Moment(c, *r.ResolvedAt)
		}
		if r.Resolution == "" {
			row.Release = "Release " + row.Earned + " to " + r.ProviderName + " on its next statement"
			row.ClawBack = "Claw back " + row.Earned + " from " + r.ProviderName + ", credit " + row.Charged + " to " + r.AccountName
		}
		p.Rows = append(p.Rows, row)
	}
	return s.Render(c, status, templates.Flags(p))
}

func (s *Server) resolveFlagSubmit(c echo.Context) error {
	q := flagQuery{Period: c.FormValue("period"), Account: c.FormValue("account"), Provider: c.FormValue("provider"),
		Unresolved: c.FormValue("unresolved") == "1"}
	res, err := s.invoicing.ResolveFlag(c.Request().Context(), invoicing.ResolveInput{RequestID: c.FormValue("request_id"),
		By: core.UserID(c), Resolution: invoicing.Resolution(c.FormValue("resolution")), Note: c.FormValue("note")})
	if err != nil {
		if services.ErrorCode(err) == services.CodeNotFound {
			return err
		}
		return s.FormError(c, err, func(f templates.Form) error {
			return s.renderFlags(c, core.StatusFor(err), q, f)
		})
	}
	v := q.values()
	v.Set("flash", "flag-released")
	if res.Resolution == invoicing.ResolutionClawBack {
		v.Set("flash", "flag-clawback")
	}
	return c.Redirect(http.StatusSeeOther, "/finance/flags?"+v.Encode())
}

func (s *Server) apiFlags(c echo.Context) error {
	f, err := readFlagQuery(c).filter()
	if err != nil {
		return err
	}
	list, err := s.invoicing.FlaggedRequests(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"flagged_requests": list, "count": len(list)})
}

// apiResolveFlag releases a flagged request's held earnings or claws them back. A claw back
// moves money: the provider's payable gives up the request's earnings and the customer's
// credit gets back its charge.
func (s *Server) apiResolveFlag(c echo.Context) error {
	var in struct {
		RequestID  string `json:"request_id"`
		Resolution string `json:"resolution"`
		Note       string `json:"note"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	res, err := s.invoicing.ResolveFlag(c.Request().Context(), invoicing.ResolveInput{RequestID: in.RequestID, By: core.UserID(c),
		Resolution: invoicing.Resolution(in.Resolution), Note: in.Note})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// flagTokens writes a token count with thousands separators: 1,000,000.
func flagTokens(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteString("-")
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// seenTokens is what a response's usage said, "-" when it said nothing.
func seenTokens(n *int64) string {
	if n == nil {
		return "-"
	}
	return flagTokens(*n)
}
