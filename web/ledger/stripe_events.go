package ledger

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The events Stripe sent, as the webhook recorded them.

// stripeEventsShown is how many of the latest Stripe events the audit page lists.
const stripeEventsShown = 100

func (s *Server) stripeEventsPage(c echo.Context) error {
	events, err := s.Payments.Webhook.RecentEvents(c.Request().Context(), stripeEventsShown)
	if err != nil {
		return err
	}
	p := templates.StripeEventsPage{Page: s.Page(c, "Stripe events"), Limit: stripeEventsShown}
	for _, ev := range events {
		p.Events = append(p.Events, templates.StripeEventRow{ID: ev.ID, Type: ev.Type, Outcome: ev.Outcome, Deliveries: ev.Deliveries,
			FirstReceived: core.MomentSeconds(c, ev.FirstReceivedAt), LastReceived: core.MomentSeconds(c, ev.LastReceivedAt)})
	}
	return s.Render(c, http.StatusOK, templates.StripeEvents(p))
}
