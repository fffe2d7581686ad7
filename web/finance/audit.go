package finance

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// The finance audit log, as a page and as JSON, and the month's journal of ledger postings.

// auditQuery reads the log's filters. From and To are days in UTC (To inclusive) or, for the
// API, instants in RFC 3339 (To exclusive).
func auditQuery(c echo.Context) (audit.Filter, error) {
	fe := services.FieldErrors{}
	f := audit.Filter{Action: audit.Action(c.QueryParam("action")), ActorID: c.QueryParam("actor"),
		SubjectKind: strings.TrimSpace(c.QueryParam("subject_kind")), SubjectID: strings.TrimSpace(c.QueryParam("subject_id"))}
	for _, b := range []struct {
		field string
		into  *time.Time
		next  bool // a day means up to its end
	}{{"from", &f.From, false}, {"to", &f.To, true}} {
		v := strings.TrimSpace(c.QueryParam(b.field))
		if v == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			*b.into = t.UTC()
		} else if d, err := time.Parse(time.DateOnly, v); err == nil {
			if b.next {
				d = d.AddDate(0, 0, 1)
			}
			*b.into = d
		} else {
			fe.Add(b.field, "Enter a day, like 2026-04-30, or a time in RFC 3339.")
		}
	}
	for _, n := range []struct {
		field string
		into  any
	}{{"limit", &f.Limit}, {"before", &f.Before}} {
		v := c.QueryParam(n.field)
		if v == "" {
			continue
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fe.Add(n.field, "Enter a whole number.")
			continue
		}
		switch p := n.into.(type) {
		case *int:
			if x > int64(audit.MaxLimit) || x < 0 {
				fe.Add(n.field, "Ask for 1 to "+strconv.Itoa(audit.MaxLimit)+" entries a page.")
				continue
			}
			*p = int(x)
		case *int64:
			*p = x
		}
	}
	if err := fe.Err(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

func (s *Server) auditPage(c echo.Context) error {
	ctx := c.Request().Context()
	p := templates.AuditPage{Page: s.Page(c, "Audit log"), Action: c.QueryParam("action"), Actor: c.QueryParam("actor"),
		From: c.QueryParam("from"), To: c.QueryParam("to"), SubjectKind: c.QueryParam("subject_kind"),
		SubjectID: c.QueryParam("subject_id"), Actions: []templates.Option{{Value: "", Label: "any"}},
		Actors: []templates.Option{{Value: "", Label: "anyone"}}}
	for _, a := range audit.Actions {
		p.Actions = append(p.Actions, templates.Option{Value: string(a), Label: strings.ReplaceAll(string(a), "_", " ")})
	}
	users, err := s.Accounts.ListUsers(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.Role == accounts.RoleFinance || u.Role == accounts.RoleAdmin {
			p.Actors = append(p.Actors, templates.Option{Value: u.ID, Label: u.Email})
		}
	}
	slices.SortFunc(p.Actors[1:], func(a, b templates.Option) int { return strings.Compare(a.Label, b.Label) })
	f, err := auditQuery(c)
	var page audit.Page
	if err == nil {
		page, err = s.audit.List(ctx, f)
	}
	if err != nil {
		return s.FormError(c, err, func(form templates.Form) error {
			p.Form = form
			return s.Render(c, core.StatusFor(err), templates.Audit(p))
		})
	}
	names, err := s.subjectNames(c, page.Entries)
	if err != nil {
		return err
	}
	p.Rows = auditRows(core.Zone(c), page.Entries, names)
	if page.Next > 0 {
		v := c.QueryParams()
		older := url.Values{}
		for k, vs := range v {
			older[k] = vs
		}
		older.Set("before", strconv.FormatInt(page.Next, 10))
		p.OlderURL = "/finance/audit?" + older.Encode()
	}
	return s.Render(c, http.StatusOK, templates.Audit(p))
}

func (s *Server) apiAudit(c echo.Context) error {
	f, err := auditQuery(c)
	if err != nil {
		return err
	}
	page, err := s.audit.List(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

// auditRows are the entries as the page lists them: moments in loc, each subject by its name
// where names has it (kind+" "+id: an invoice's or statement's number and party, an account's
// name), the id kept in a copyable detail.
func auditRows(loc *time.Location, entries []audit.Entry, names map[string]string) []templates.AuditRow {
	out := make([]templates.AuditRow, 0, len(entries))
	for _, e := range entries {
		subject, named := e.SubjectKind+" "+e.SubjectID, ""
		if n, ok := names[subject]; ok {
			subject, named = e.SubjectKind+" "+n, e.SubjectID
		}
		out = append(out, templates.AuditRow{ID: strconv.FormatInt(e.ID, 10), At: core.MomentIn(loc, e.At, core.ToSecond), Actor: e.Actor,
			Action: strings.ReplaceAll(string(e.Action), "_", " "), Subject: subject, SubjectID: named,
			SubjectURL: subjectURL(e.SubjectKind, e.SubjectID), Summary: e.Summary, Before: string(e.Before), After: string(e.After)})
	}
	return out
}

// subjectNames names the entries' subjects a person knows by name, by kind+" "+id: each
// invoice and statement by its number and party, each account by its name. One query reads
// each kind, whatever the page holds.
func (s *Server) subjectNames(c echo.Context, entries []audit.Entry) (map[string]string, error) {
	ctx := c.Request().Context()
	var invoiceIDs, statementIDs, accountIDs []string
	for _, e := range entries {
		switch e.SubjectKind {
		case "invoice":
			invoiceIDs = append(invoiceIDs, e.SubjectID)
		case "statement":
			statementIDs = append(statementIDs, e.SubjectID)
		case "account":
			accountIDs = append(accountIDs, e.SubjectID)
		}
	}
	out := map[string]string{}
	invoices, err := s.invoicing.InvoicesByID(ctx, invoiceIDs)
	if err != nil {
		return nil, err
	}
	for id, inv := range invoices {
		out["invoice "+id] = inv.DisplayNumber + " (" + inv.AccountName + ", " + inv.Period.Label() + ")"
	}
	statements, err := s.invoicing.StatementsByID(ctx, statementIDs)
	if err != nil {
		return nil, err
	}
	for id, st := range statements {
		out["statement "+id] = st.DisplayNumber + " (" + st.ProviderName + ", " + st.Period.Label() + ")"
	}
	names, err := s.Accounts.AccountNames(ctx, accountIDs)
	if err != nil {
		return nil, err
	}
	for id, n := range names {
		out["account "+id] = n
	}
	return out, nil
}

// subjectURL is the page of what an entry acted on, "" when it has none.
func subjectURL(kind, id string) string {
	switch kind {
	case "invoice":
		return "/finance/invoices/" + url.PathEscape(id)
	case "statement":
		return "/finance/statements/" + url.PathEscape(id)
	case "period":
		return "/finance/close?period=" + url.QueryEscape(id)
	case "price":
		return "/finance/prices"
	}
	return ""
}

// journalCSV writes the month's journal, every ledger posting with its transaction, account
// and amount, as a CSV attachment. Nothing is sent until the journal's first rows are read, so
// a journal that cannot be read at all is a proper error; one cut off later is logged.
func (s *Server) journalCSV(c echo.Context) error {
	if s.journal == nil {
		return services.Errorf(services.CodeUnavailable, "The journal is not available on this server.")
	}
	period, err := documents.ParseMonth(c.QueryParam("period"))
	if err != nil {
		return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"period": "Give the month, like period=2026-03."}}
	}
	res := c.Response()
	out, err := httpx.NewDeadlineWriter(res, httpx.ExportWindow)
	if err != nil {
		return err
	}
	w := &startOnWrite{w: out, start: func() {
		res.Header().Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		res.Header().Set(echo.HeaderContentDisposition, attachment("gpumarket-journal-"+period.Start.Format("2006-01")+".csv"))
		res.Header().Set("Cache-Control", "no-store")
		res.WriteHeader(http.StatusOK)
	}}
	err = s.journal(c.Request().Context(), period, w)
	if err != nil && w.started {
		// The status is sent: the client sees a cut-off file, the log sees why.
		s.Log.Error("journal export failed", "path", c.Path(), "request_id", res.Header().Get(echo.HeaderXRequestID), "err", err)
		return nil
	}
	if err == nil && !w.started {
		w.start()
	}
	return err
}

// startOnWrite calls start before its first write: the response's status and headers are
// sent only once there is something to send.
type startOnWrite struct {
	w       *httpx.DeadlineWriter
	start   func()
	started bool
}

func (s *startOnWrite) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.start()
	}
	return s.w.Write(p)
}

// Journal writes the period's journal of ledger postings to w as CSV.
type Journal func(ctx context.Context, period documents.Period, w io.Writer) error
