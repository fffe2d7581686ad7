package ledger

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The price book: the prices in force and the changes scheduled, and scheduling one.

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
			CachedInput: pr.CachedInput.String(), EffectiveFrom: core.MomentIn(time.UTC, pr.EffectiveFrom, core.ToMinute)})
	}
	for _, ch := range history {
		by := ch.CreatedBy
		if by == "" {
			by = "platform default"
		}
		p.History = append(p.History, templates.PriceChangeRow{Tier: string(ch.Tier), Model: ch.Model, Input: ch.Input.String(), Output: ch.Output.String(),
			CachedInput: ch.CachedInput.String(), EffectiveFrom: core.MomentIn(time.UTC, ch.EffectiveFrom, core.ToMinute), ScheduledBy: by, ScheduledAt: core.Moment(c, ch.CreatedAt),
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
