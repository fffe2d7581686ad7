package account

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/webhooks"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Webhooks: an account's endpoints, the events sent to them and the log of each attempt
// (docs/webhooks.md). Who may manage them is the access table's rule for /settings/webhooks.

// recentDeliveries is how many of the latest deliveries the page shows.
const recentDeliveries = 25

func (s *Server) webhooksService() (*webhooks.Service, error) {
	if s.webhooks == nil || !s.webhooks.Delivers() {
		return nil, services.Errorf(services.CodeUnavailable, "Webhooks are not available on this server.")
	}
	return s.webhooks, nil
}

// caller is the signed-in user's account and id, and whether the account is a provider's.
func caller(c echo.Context) (account, user string, provider bool) {
	sess, _ := core.CurrentSession(c)
	return sess.User.AccountID, sess.User.ID, sess.User.Role == accounts.RoleProvider
}

func (s *Server) webhooksPage(c echo.Context) error {
	return s.renderWebhooks(c, http.StatusOK, templates.Form{}, nil, nil)
}

// renderWebhooks renders the page: form and chosen are the add form as it was refused, created
// the endpoint just added with its secret.
func (s *Server) renderWebhooks(c echo.Context, status int, form templates.Form, chosen []string, created *templates.CreatedWebhook) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	account, _, provider := caller(c)
	endpoints, err := wh.Endpoints(ctx, account)
	if err != nil {
		return err
	}
	deliveries, err := wh.Deliveries(ctx, account, "", recentDeliveries)
	if err != nil {
		return err
	}
	p := templates.WebhooksPage{Page: s.Page(c, "Webhooks"), Form: form, Created: created}
	for _, t := range webhooks.EventTypesFor(provider) {
		p.EventTypes = append(p.EventTypes, templates.WebhookEventType{Name: t.Name, Description: t.Description,
			Checked: slices.Contains(chosen, t.Name)})
	}
	for _, e := range endpoints {
		p.Endpoints = append(p.Endpoints, endpointRow(core.Zone(c), e))
	}
	for _, d := range deliveries {
		p.Deliveries = append(p.Deliveries, deliveryRow(core.Zone(c), d))
	}
	return s.Render(c, status, templates.Webhooks(p))
}

func endpointRow(loc *time.Location, e webhooks.Endpoint) templates.WebhookEndpointRow {
	events := "all events"
	if len(e.EventTypes) > 0 {
		events = strings.Join(e.EventTypes, ", ")
	}
	status := "enabled"
	if !e.Enabled {
		status = "disabled"
	}
	return templates.WebhookEndpointRow{ID: e.ID, URL: e.URL, Description: e.Description, Events: events,
		SecretHint: e.SecretHint, Status: status, Enabled: e.Enabled, Created: core.MomentIn(loc, e.CreatedAt, core.ToMinute)}
}

func deliveryRow(loc *time.Location, d webhooks.Delivery) templates.WebhookDeliveryRow {
	row := templates.WebhookDeliveryRow{ID: d.ID, EventID: d.EventID, EventType: d.EventType, Endpoint: d.EndpointURL,
		Status: d.Status, Created: core.MomentIn(loc, d.CreatedAt, core.ToSecond), CanReplay: d.Status != webhooks.StatusPending}
	if d.LastStatusCode != nil {
		row.Last = strconv.Itoa(*d.LastStatusCode)
	} else if d.Status == webhooks.StatusPending && len(d.Attempts) == 0 {
		row.Last = "not sent yet"
	} else {
		row.Last = "no answer"
	}
	if d.Status == webhooks.StatusPending && d.NextAttemptAt != nil && d.Tries > 0 {
		row.Next = "next try " + core.MomentIn(loc, *d.NextAttemptAt, "15:04:05")
	}
	for _, a := range d.Attempts {
		ar := templates.WebhookAttemptRow{At: core.MomentIn(loc, a.AttemptedAt, core.ToSecond), Duration: fmt.Sprintf("%d ms", a.DurationMs),
			Error: a.Error, Body: a.ResponseBody, Replay: a.Replay, Status: "no answer"}
		if a.StatusCode != nil {
			ar.Status = strconv.Itoa(*a.StatusCode)
		}
		row.Attempts = append(row.Attempts, ar)
	}
	return row
}

// webhookFields are the form's fields, shown again as typed when the form is refused.
var webhookFields = []string{"url", "description"}

// createWebhookSubmit adds an endpoint and shows its secret, this once.
func (s *Server) createWebhookSubmit(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, user, _ := caller(c)
	form, _ := c.FormParams()
	in := webhooks.EndpointInput{URL: c.FormValue("url"), Description: c.FormValue("description"), EventTypes: form["event_types"]}
	e, secret, err := wh.CreateEndpoint(c.Request().Context(), account, user, in)
	if code := services.ErrorCode(err); code == services.CodeInvalid || code == services.CodeConflict {
		_, body := s.Describe(err)
		values := core.Submitted(c, webhookFields...)
		return s.renderWebhooks(c, http.StatusUnprocessableEntity,
			templates.Form{Values: values, Errors: body.Fields, Error: body.Message}, in.EventTypes, nil)
	}
	if err != nil {
		return err
	}
	return s.renderWebhooks(c, http.StatusOK, templates.Form{}, nil, &templates.CreatedWebhook{URL: e.URL, Secret: secret})
}

func (s *Server) enableWebhookSubmit(c echo.Context) error  { return s.setWebhookEnabled(c, true) }
func (s *Server) disableWebhookSubmit(c echo.Context) error { return s.setWebhookEnabled(c, false) }

func (s *Server) setWebhookEnabled(c echo.Context, enabled bool) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	if _, err := wh.SetEnabled(c.Request().Context(), account, c.Param("id"), enabled); err != nil {
		return err
	}
	flash := "webhook-disabled"
	if enabled {
		flash = "webhook-enabled"
	}
	return c.Redirect(http.StatusSeeOther, "/settings/webhooks?flash="+flash)
}

func (s *Server) deleteWebhookSubmit(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	e, err := ownEndpoint(c, wh, account, c.Param("id"))
	if err != nil {
		return err
	}
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Delete the endpoint " + e.URL,
		Consequences: []string{
			"Deleting the endpoint " + e.URL + " cannot be undone: no event is sent to it again, and its deliveries and their log are deleted with it.",
			"To stop events for a while instead, disable it: it keeps its signing secret and its log.",
		},
		Button: "Delete the endpoint", Action: "/settings/webhooks/" + e.ID + "/delete", Back: "/settings/webhooks", Danger: true},
		Binds: []string{"delete webhook endpoint", e.ID}}
	if !core.Confirmed(c, conf) {
		return s.AskToConfirm(c, "Delete a webhook endpoint", conf)
	}
	if err := wh.DeleteEndpoint(c.Request().Context(), account, e.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/webhooks?flash=webhook-deleted")
}

// ownEndpoint is one of the account's endpoints; another account's, or none, is not found.
func ownEndpoint(c echo.Context, wh *webhooks.Service, account, id string) (webhooks.Endpoint, error) {
	list, err := wh.Endpoints(c.Request().Context(), account)
	if err != nil {
		return webhooks.Endpoint{}, err
	}
	for _, e := range list {
		if e.ID == id {
			return e, nil
		}
	}
	return webhooks.Endpoint{}, services.Errorf(services.CodeNotFound, "No such webhook endpoint.")
}

func (s *Server) testWebhookSubmit(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	if _, err := wh.SendTest(c.Request().Context(), account, c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/webhooks?flash=webhook-test-sent")
}

func (s *Server) replayWebhookSubmit(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	if _, err := wh.Replay(c.Request().Context(), account, c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/webhooks?flash=webhook-replayed")
}

// The JSON API: the same as the page.

type webhooksJSON struct {
	Endpoints  []webhooks.Endpoint  `json:"endpoints"`
	EventTypes []webhooks.EventType `json:"event_types"` // what the account's endpoints may subscribe to
}

func (s *Server) apiWebhooks(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, provider := caller(c)
	list, err := wh.Endpoints(c.Request().Context(), account)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhooksJSON{Endpoints: nonNilList(list), EventTypes: webhooks.EventTypesFor(provider)})
}

// createdWebhookJSON is a new endpoint with its secret: the only answer that carries it.
type createdWebhookJSON struct {
	Endpoint webhooks.Endpoint `json:"endpoint"`
	Secret   string            `json:"secret"`
}

func (s *Server) apiCreateWebhook(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	var in webhooks.EndpointInput
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	account, user, _ := caller(c)
	e, secret, err := wh.CreateEndpoint(c.Request().Context(), account, user, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, createdWebhookJSON{Endpoint: e, Secret: secret})
}

func (s *Server) apiUpdateWebhook(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if in.Enabled == nil {
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"enabled": "Say true or false."}}
	}
	account, _, _ := caller(c)
	e, err := wh.SetEnabled(c.Request().Context(), account, c.Param("id"), *in.Enabled)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (s *Server) apiDeleteWebhook(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	if err := wh.DeleteEndpoint(c.Request().Context(), account, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiTestWebhook(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	id, err := wh.SendTest(c.Request().Context(), account, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"event_id": id})
}

func (s *Server) apiWebhookDeliveries(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	limit := 50
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 100 {
			return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
				Fields: map[string]string{"limit": "Use 1 to 100."}}
		}
	}
	account, _, _ := caller(c)
	list, err := wh.Deliveries(c.Request().Context(), account, c.QueryParam("endpoint_id"), limit)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]webhooks.Delivery{"deliveries": nonNilList(list)})
}

func (s *Server) apiWebhookDelivery(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	d, err := wh.Delivery(c.Request().Context(), account, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiReplayWebhook(c echo.Context) error {
	wh, err := s.webhooksService()
	if err != nil {
		return err
	}
	account, _, _ := caller(c)
	d, err := wh.Replay(c.Request().Context(), account, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

func nonNilList[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
