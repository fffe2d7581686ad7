package admin

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Discrepancies: requests whose usage as the gateway saw it differs from what was metered. An
// administrator marks each resolved with a note once looked into; the page shows the open ones
// by default, the resolved ones apart.

// discrepancyState is the state a page or the API asks for: open unless it says otherwise;
// the API may also ask for all.
func discrepancyState(c echo.Context, api bool) (requestlog.DiscrepancyState, error) {
	switch q := c.QueryParam("state"); q {
	case "", "open":
		return requestlog.DiscrepanciesOpen, nil
	case "resolved":
		return requestlog.DiscrepanciesResolved, nil
	case "all":
		if api {
			return requestlog.DiscrepanciesAll, nil
		}
	}
	if api {
		return "", core.FieldError("state", "Choose open, resolved or all.")
	}
	return "", core.FieldError("state", "Choose open or resolved.")
}

func (s *Server) discrepancies(c echo.Context, state requestlog.DiscrepancyState) ([]requestlog.Discrepancy, error) {
	if s.requests == nil {
		return []requestlog.Discrepancy{}, nil
	}
	return s.requests.Discrepancies(c.Request().Context(), requestlog.DiscrepancyFilter{State: state, Limit: 200})
}

func (s *Server) apiDiscrepancies(c echo.Context) error {
	state, err := discrepancyState(c, true)
	if err != nil {
		return err
	}
	list, err := s.discrepancies(c, state)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"discrepancies": list, "count": len(list)})
}

// discrepanciesPage lists flagged requests for an admin to review.
func (s *Server) discrepanciesPage(c echo.Context) error {
	state, err := discrepancyState(c, false)
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			return s.renderDiscrepancies(c, http.StatusUnprocessableEntity, requestlog.DiscrepanciesOpen, f)
		})
	}
	return s.renderDiscrepancies(c, http.StatusOK, state, templates.Form{})
}

func (s *Server) renderDiscrepancies(c echo.Context, status int, state requestlog.DiscrepancyState, form templates.Form) error {
	list, err := s.discrepancies(c, state)
	if err != nil {
		return err
	}
	tokens := func(n *int64) string {
		if n == nil {
			return "-"
		}
		return strconv.FormatInt(*n, 10)
	}
	ids := make([]string, 0, len(list))
	for _, d := range list {
		ids = append(ids, d.OfferingID)
	}
	labels, err := s.offeringLabels(c, ids)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	p := templates.DiscrepanciesPage{Page: s.Page(c, "Discrepancies"), Form: form, State: string(state),
		// The administrators resolve; finance reads the same lists.
		CanResolve: s.requests != nil && s.audit != nil && core.MayView(sess, "/admin/discrepancies/resolve")}
	path := c.Request().URL.Path
	for _, l := range []struct {
		state requestlog.DiscrepancyState
		label string
	}{{requestlog.DiscrepanciesOpen, "Open"}, {requestlog.DiscrepanciesResolved, "Resolved"}} {
		p.StateLinks = append(p.StateLinks, templates.FilterLink{Label: l.label, Href: path + "?state=" + string(l.state),
			TestID: "state-" + string(l.state), Current: l.state == state})
	}
	for _, d := range list {
		row := templates.DiscrepancyRow{Flagged: core.MomentSeconds(c, d.FlaggedAt), RequestID: d.RequestID,
			OfferingID: d.OfferingID, Offering: labelOr(labels, d.OfferingID), Tier: string(d.Tier), Model: d.Model,
			Seen: tokens(d.InputTokens) + " / " + tokens(d.OutputTokens), Reported: tokens(d.ReportedInput) + " / " + tokens(d.ReportedOutput),
			Metered: tokens(d.MeteredInput) + " / " + tokens(d.MeteredOutput), Excess: tokens(d.ExcessInput) + " / " + tokens(d.ExcessOutput),
			Flag: d.MeterFlag, Reason: d.Reason}
		if r := d.Resolution; r != nil {
			by := r.ResolvedBy
			if by == "" {
				by = "an administrator"
			}
			row.Resolved, row.Note = "Resolved by "+by+" at "+core.Moment(c, r.ResolvedAt), r.Note
		}
		p.Rows = append(p.Rows, row)
	}
	return s.Render(c, status, templates.Discrepancies(p))
}

// resolveDiscrepancySubmit marks a discrepancy resolved with the administrator's note.
func (s *Server) resolveDiscrepancySubmit(c echo.Context) error {
	if _, err := s.resolve(c, c.FormValue("request_id"), c.FormValue("note")); err != nil {
		if services.ErrorCode(err) == services.CodeNotFound {
			return err
		}
		return s.FormError(c, err, func(f templates.Form) error {
			return s.renderDiscrepancies(c, core.StatusFor(err), requestlog.DiscrepanciesOpen, f)
		})
	}
	return c.Redirect(http.StatusSeeOther, "/admin/discrepancies?flash=discrepancy-resolved")
}

// apiResolveDiscrepancy marks a discrepancy resolved: {"request_id", "note"}, answered with the
// resolution.
func (s *Server) apiResolveDiscrepancy(c echo.Context) error {
	var in struct {
		RequestID string `json:"request_id"`
		Note      string `json:"note"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	res, err := s.resolve(c, in.RequestID, in.Note)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) resolve(c echo.Context, requestID, note string) (requestlog.DiscrepancyResolution, error) {
	if s.requests == nil || s.audit == nil {
		return requestlog.DiscrepancyResolution{}, errNoRequestLog
	}
	sess, _ := core.CurrentSession(c)
	res, err := s.requests.ResolveDiscrepancy(c.Request().Context(), s.audit, requestlog.ResolveInput{RequestID: requestID,
		By: sess.User.ID, Note: note})
	if err != nil {
		return res, err
	}
	res.ResolvedBy = sess.User.Email
	return res, nil
}

var errNoRequestLog = services.Errorf(services.CodeUnavailable, "Discrepancies cannot be resolved in this process: it keeps no request log.")

// offeringLabels names the offerings of ids (catalog.Label); none without a catalog.
func (s *Server) offeringLabels(c echo.Context, ids []string) (map[string]string, error) {
	if s.catalog == nil {
		return map[string]string{}, nil
	}
	return s.catalog.LabelsByID(c.Request().Context(), ids)
}

// labelOr is the label of id, or "—" for an offering with none (a request no rig served).
func labelOr(labels map[string]string, id string) string {
	if l, ok := labels[id]; ok {
		return l
	}
	if id == "" {
		return "—"
	}
	return "unknown offering"
}
