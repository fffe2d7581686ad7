package developer

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/charts"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reports"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// ReportSource is what the reports pages need of services/reports: an account's savings and
// its energy and carbon over a query's periods. *reports.Service is one.
type ReportSource interface {
	Savings(ctx context.Context, accountID string, q reports.Query) (reports.Savings, error)
	Carbon(ctx context.Context, accountID string, q reports.Query) (reports.Carbon, error)
}

func (s *Server) needsReports(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.reports == nil {
			return services.Errorf(services.CodeUnavailable, "Reports are not available on this server.")
		}
		return next(c)
	}
}

// parseReportQuery reads a report's period as the dashboard's form and the CSV links give
// it, as the JSON does (reports.ParseQuery): from and to are UTC dates, both included (the last
// 30 days to today without them); group is "day" (the default) or "month", and a month report
// covers whole months. Every bad value is named in the error.
func parseReportQuery(from, to, group string, now time.Time) (reports.Query, error) {
	return reports.ParseQuery(from, to, group, now)
}

// reportQueryValues is the query string of a report's period, for its links.
func reportQueryValues(q reports.Query) url.Values {
	return url.Values{"from": {q.From.Format(core.DateLayout)}, "to": {q.To.AddDate(0, 0, -1).Format(core.DateLayout)}, "group": {string(q.Group)}}
}

// readReportQuery reads the dashboard's period. A customer who asks for none sees the last
// whole month by day, the month of its latest invoice, so that the figures can be set beside
// it; the JSON's default is the last 30 days.
func (s *Server) readReportQuery(c echo.Context) (reports.Query, error) {
	from, to, group := c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("group")
	if from == "" && to == "" && group == "" {
		first, last := core.LastMonth(s.Now())
		from, to = first.Format(core.DateLayout), last.Format(core.DateLayout)
	}
	return parseReportQuery(from, to, group, s.Now())
}

// reportShortcuts are the periods a customer asks for most, as links.
func reportShortcuts(now time.Time) []templates.ReportLink {
	now = now.UTC()
	first, last := core.LastMonth(now)
	this := last.AddDate(0, 0, 1)
	link := func(label string, from, to time.Time, group reports.Group) templates.ReportLink {
		v := url.Values{"from": {from.Format(core.DateLayout)}, "to": {to.Format(core.DateLayout)}, "group": {string(group)}}
		return templates.ReportLink{Label: label, URL: "/reports?" + v.Encode()}
	}
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return []templates.ReportLink{
		link("Last month", first, last, reports.GroupDay),
		link("This month", this, today, reports.GroupDay),
		link("Last 30 days", today.AddDate(0, 0, -(reports.DefaultDays-1)), today, reports.GroupDay),
		link("Last 12 months by month", this.AddDate(-1, 0, 0), today, reports.GroupMonth),
	}
}

// reportsPage is the customer's dashboard: spend against the baseline per period, tokens per
// tier, energy and carbon per period against the baseline's.
func (s *Server) reportsPage(c echo.Context) error {
	ctx := c.Request().Context()
	q, qerr := s.readReportQuery(c)
	if fields := core.InvalidFields(qerr); fields != nil {
		p := templates.ReportsPage{Page: s.Page(c, "Reports"), From: c.QueryParam("from"), To: c.QueryParam("to"),
			Group: c.QueryParam("group"), Errors: fields, Shortcuts: reportShortcuts(s.Now())}
		return s.Render(c, http.StatusUnprocessableEntity, templates.Reports(p))
	} else if qerr != nil {
		return qerr
	}
	sess, _ := core.CurrentSession(c)
	sav, err := s.reports.Savings(ctx, sess.User.AccountID, q)
	if err != nil {
		return err
	}
	car, err := s.reports.Carbon(ctx, sess.User.AccountID, q)
	if err != nil {
		return err
	}
	p, err := reportsView(q, sav, car)
	if err != nil {
		return err
	}
	p.Page, p.Shortcuts = s.Page(c, "Reports"), reportShortcuts(s.Now())
	return s.Render(c, http.StatusOK, templates.Reports(p))
}

// reportsView lays the two reports out as the dashboard shows them.
func reportsView(q reports.Query, sav reports.Savings, car reports.Carbon) (templates.ReportsPage, error) {
	v := reportQueryValues(q)
	p := templates.ReportsPage{
		From: v.Get("from"), To: v.Get("to"), Group: string(q.Group), MethodVersion: sav.MethodVersion,
		SavingsCSV: "/reports/savings.csv?" + v.Encode(), CarbonCSV: "/reports/carbon.csv?" + v.Encode(),
	}
	if p.MethodVersion == "" {
		p.MethodVersion = car.MethodVersion
	}
	t, ct := sav.Totals, car.Totals
	// A month report shows the months' figures as their invoices print them, saving and its
	// percent included (reports.InvoicedSaving); a report by day rounds its exact spend and
	// baseline once each, and its saving is their difference (reports.RoundedSaving): either way
	// the spend and the saving shown add up to the baseline shown.
	shown := t.Invoiced
	if shown == nil {
		rounded, err := reports.RoundedSaving(t.Spend, t.Baseline)
		if err != nil {
			return templates.ReportsPage{}, err
		}
		shown = &rounded
	}
	spend, base, saved, pct := money.FormatCents(shown.SpendCents), money.FormatCents(shown.BaselineCents), money.FormatCents(shown.SavedCents), shown.SavedPct
	if pct != "" {
		saved += " (" + pct + "%)"
	}
	p.Totals = []templates.ReportFigure{
		{ID: "spend", Label: "Spend", Value: spend, MethodURL: "/methodology#savings"},
		{ID: "baseline", Label: "Baseline (realtime price)", Value: base, MethodURL: "/methodology#baseline"},
		{ID: "savings", Label: "Saved", Value: saved, MethodURL: "/methodology#savings"},
	}
	p.Totals = append(p.Totals, []templates.ReportFigure{
		{ID: "energy", Label: "Energy", Value: fmt.Sprintf("%s kWh (%s measured, %s simulated, %s estimated)",
			reportFloat(ct.EnergyKWh), reportFloat(ct.MeasuredKWh), reportFloat(ct.SimulatedKWh), reportFloat(ct.EstimatedKWh)),
			MethodURL: "/methodology#energy"},
		{ID: "carbon", Label: "Carbon (location-based)", Value: reportFloat(ct.GCO2e) + " gCO2e", MethodURL: "/methodology#carbon"},
		{ID: "carbon-baseline", Label: "Carbon on enterprise GPUs", Value: reportFloat(ct.BaselineGCO2e) + " gCO2e", MethodURL: "/methodology#carbon-baseline"},
	}...)
	// Each chart spans the periods its report covers, which may be wider than asked: a
	// month report covers whole months.
	sq, cq := reportSpan(q, sav.From, sav.To, sav.Group), reportSpan(q, car.From, car.To, car.Group)
	for _, c := range []struct {
		build func(reports.Query, reports.Savings, reports.Carbon) (reportChart, error)
		span  reports.Query
	}{{spendChart, sq}, {tokensChart, sq}, {energyChart, cq}, {carbonChart, cq}} {
		rc, err := c.build(c.span, sav, car)
		if err != nil {
			return p, err
		}
		view, err := rc.view()
		if err != nil {
			return p, err
		}
		if rc.csv == "savings" {
			view.CSVURL = p.SavingsCSV
		} else {
			view.CSVURL = p.CarbonCSV
		}
		p.Charts = append(p.Charts, view)
	}
	return p, nil
}

// reportSpan is the span a report states it covers, or q when it states none.
func reportSpan(q reports.Query, from, to time.Time, g reports.Group) reports.Query {
	if from.IsZero() || !to.After(from) || (g != reports.GroupDay && g != reports.GroupMonth) {
		return q
	}
	return reports.Query{From: from.UTC(), To: to.UTC(), Group: g}
}

// reportChart is one chart of the dashboard: its picture's figures and its table's text,
// cell for cell.
type reportChart struct {
	id, method, csv string
	kind            charts.Kind
	chart           charts.Chart
	columns         []string
	rows            []templates.ChartRow
}

func (rc reportChart) view() (templates.ChartView, error) {
	svg, err := charts.Draw(rc.chart, rc.kind, charts.SVG)
	if err != nil {
		return templates.ChartView{}, err
	}
	narrow, err := charts.DrawAt(rc.chart, rc.kind, charts.SVG, charts.Width/2, charts.Height)
	if err != nil {
		return templates.ChartView{}, err
	}
	return templates.ChartView{ID: rc.id, Title: rc.chart.Title, SVG: string(svg), NarrowSVG: string(narrow), Columns: rc.columns,
		Rows: rc.rows, MethodURL: "/methodology#" + rc.method}, nil
}

// reportPeriods are the starts of every period of the query, in order, so that a day without
// usage shows as a zero rather than as a gap the line jumps over.
func reportPeriods(q reports.Query) []time.Time {
	var out []time.Time
	for t := q.From; t.Before(q.To); {
		out = append(out, t)
		if q.Group == reports.GroupMonth {
			t = t.AddDate(0, 1, 0)
		} else {
			t = t.AddDate(0, 0, 1)
		}
	}
	return out
}

// ReportPeriodLabel writes a period's start as its row shows it: "2026-03-14", or "2026-03"
// by month.
func ReportPeriodLabel(g reports.Group, t time.Time) string {
	if g == reports.GroupMonth {
		return t.UTC().Format("2006-01")
	}
	return t.UTC().Format(core.DateLayout)
}

func periodIndex(periods []time.Time, t time.Time) int {
	return slices.IndexFunc(periods, func(p time.Time) bool { return p.Equal(t) })
}

// usdFigure is an exact amount as a float of dollars, for the picture only.
func usdFigure(b money.BigPico) float64 {
	f, _ := strconv.ParseFloat(b.Decimal(6), 64)
	return f
}

// reportFloat writes an energy or carbon figure: the chart tables' rule (at least three
// significant digits, at most six decimals).
func reportFloat(v float64) string { return documents.ChartValue(v) }

func spendChart(q reports.Query, sav reports.Savings, _ reports.Carbon) (reportChart, error) {
	periods := reportPeriods(q)
	spend, base := make([]money.BigPico, len(periods)), make([]money.BigPico, len(periods))
	for _, r := range sav.Rows {
		i := periodIndex(periods, r.Period)
		if i < 0 {
			return reportChart{}, fmt.Errorf("reports: a savings row of %s outside the period", r.Period)
		}
		spend[i], base[i] = spend[i].Add(r.Spend), base[i].Add(r.Baseline)
	}
	rc := reportChart{id: "spend", method: "savings", csv: "savings", kind: charts.Line,
		chart:   charts.Chart{Title: "Spend against the baseline per " + string(q.Group), Unit: "USD"},
		columns: []string{periodHead(q.Group), "Spend (USD)", "Baseline (USD)", "Saved (USD)"}}
	s, b := charts.Series{Name: "Spend"}, charts.Series{Name: "Baseline (realtime price)"}
	for i, t := range periods {
		label := ReportPeriodLabel(q.Group, t)
		rc.chart.Labels = append(rc.chart.Labels, label)
		s.Values, b.Values = append(s.Values, usdFigure(spend[i])), append(b.Values, usdFigure(base[i]))
		row, err := reports.RoundedSaving(spend[i], base[i]) // each row adds up at its cents
		if err != nil {
			return reportChart{}, err
		}
		rc.rows = append(rc.rows, templates.ChartRow{Label: label,
			Values: []string{money.FormatCents(row.SpendCents), money.FormatCents(row.BaselineCents), money.FormatCents(row.SavedCents)}})
	}
	rc.chart.Series = []charts.Series{s, b}
	return rc, nil
}

// reportTiers is the order tiers are shown in.
var reportTiers = []string{"realtime", "standard", "batch"}

func tokensChart(q reports.Query, sav reports.Savings, _ reports.Carbon) (reportChart, error) {
	type sum struct{ in, out, req int64 }
	byTier := map[string]*sum{}
	tiers := slices.Clone(reportTiers)
	for _, r := range sav.Rows {
		if byTier[r.Tier] == nil {
			byTier[r.Tier] = &sum{}
			if !slices.Contains(tiers, r.Tier) {
				tiers = append(tiers, r.Tier)
			}
		}
		byTier[r.Tier].in += r.InputTokens
		byTier[r.Tier].out += r.OutputTokens
		byTier[r.Tier].req += r.Requests
	}
	rc := reportChart{id: "tokens", method: "baseline", csv: "savings", kind: charts.Bars,
		chart:   charts.Chart{Title: "Tokens per tier", Unit: "tokens"},
		columns: []string{"Tier", "Requests", "Input tokens", "Output tokens"}}
	in, out := charts.Series{Name: "Input tokens"}, charts.Series{Name: "Output tokens"}
	for _, tier := range tiers {
		t := byTier[tier]
		if t == nil {
			t = &sum{}
		}
		rc.chart.Labels = append(rc.chart.Labels, tier)
		in.Values, out.Values = append(in.Values, float64(t.in)), append(out.Values, float64(t.out))
		rc.rows = append(rc.rows, templates.ChartRow{Label: tier, Values: []string{
			money.FormatCount(t.req), money.FormatCount(t.in), money.FormatCount(t.out)}})
	}
	rc.chart.Series = []charts.Series{in, out}
	return rc, nil
}

// carbonPerPeriod sums a carbon report's rows per period: value picks the figure and the
// baseline's.
func carbonPerPeriod(q reports.Query, car reports.Carbon, value func(reports.CarbonRow) (float64, float64)) ([]time.Time, []float64, []float64, error) {
	periods := reportPeriods(q)
	yours, base := make([]float64, len(periods)), make([]float64, len(periods))
	for _, r := range car.Rows {
		i := periodIndex(periods, r.Period)
		if i < 0 {
			return nil, nil, nil, fmt.Errorf("reports: a carbon row of %s outside the period", r.Period)
		}
		y, b := value(r)
		yours[i] += y
		base[i] += b
	}
	return periods, yours, base, nil
}

func energyChart(q reports.Query, _ reports.Savings, car reports.Carbon) (reportChart, error) {
	return carbonLine(q, car, "energy", "energy", "Energy per "+string(q.Group)+" against the baseline", "kWh",
		func(r reports.CarbonRow) (float64, float64) { return r.EnergyKWh, r.BaselineKWh })
}

func carbonChart(q reports.Query, _ reports.Savings, car reports.Carbon) (reportChart, error) {
	return carbonLine(q, car, "carbon", "carbon", "Carbon per "+string(q.Group)+" against the baseline", "gCO2e",
		func(r reports.CarbonRow) (float64, float64) { return r.GCO2e, r.BaselineGCO2e })
}

func carbonLine(q reports.Query, car reports.Carbon, id, method, title, unit string, value func(reports.CarbonRow) (float64, float64)) (reportChart, error) {
	periods, yours, base, err := carbonPerPeriod(q, car, value)
	if err != nil {
		return reportChart{}, err
	}
	rc := reportChart{id: id, method: method, csv: "carbon", kind: charts.Line,
		chart:   charts.Chart{Title: title, Unit: unit},
		columns: []string{periodHead(q.Group), "Your tokens (" + unit + ")", "On enterprise GPUs (" + unit + ")"}}
	y, b := charts.Series{Name: "Your tokens", Values: yours}, charts.Series{Name: "On enterprise GPUs", Values: base}
	for i, t := range periods {
		label := ReportPeriodLabel(q.Group, t)
		rc.chart.Labels = append(rc.chart.Labels, label)
		rc.rows = append(rc.rows, templates.ChartRow{Label: label, Values: []string{reportFloat(yours[i]), reportFloat(base[i])}})
	}
	rc.chart.Series = []charts.Series{y, b}
	return rc, nil
}

func periodHead(g reports.Group) string {
	if g == reports.GroupMonth {
		return "Month"
	}
	return "Day"
}

// savingsCSV exports the savings report's rows, as the dashboard's period selects them.
func (s *Server) savingsCSV(c echo.Context) error {
	q, err := s.readReportQuery(c)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	sav, err := s.reports.Savings(c.Request().Context(), sess.User.AccountID, q)
	if err != nil {
		return err
	}
	// cached_input_tokens, a part of input_tokens, comes last: readers of the earlier columns
	// read them where they were.
	rows := [][]string{{"period", "tier", "requests", "input_tokens", "output_tokens", "spend_usd", "baseline_usd",
		"savings_usd", "savings_percent", "method_version", "cached_input_tokens"}}
	for _, r := range sav.Rows {
		rows = append(rows, []string{ReportPeriodLabel(q.Group, r.Period), services.CSVText(r.Tier),
			strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.InputTokens, 10), strconv.FormatInt(r.OutputTokens, 10),
			r.Spend.Decimal(12), r.Baseline.Decimal(12), r.Savings.Decimal(12), r.SavingsPct, services.CSVText(r.MethodVersion),
			strconv.FormatInt(r.CachedInputTokens, 10)})
	}
	return writeReportCSV(c, "savings", q, rows)
}

// carbonCSV exports the carbon report's rows, as the dashboard's period selects them.
func (s *Server) carbonCSV(c echo.Context) error {
	q, err := s.readReportQuery(c)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	car, err := s.reports.Carbon(c.Request().Context(), sess.User.AccountID, q)
	if err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	rows := [][]string{{"period", "tier", "region", "requests", "tokens", "energy_kwh", "energy_measured_kwh",
		"energy_simulated_kwh", "energy_estimated_kwh", "grid_g_co2e_per_kwh", "pue", "g_co2e", "baseline_energy_kwh", "baseline_g_co2e", "method_version"}}
	for _, r := range car.Rows {
		rows = append(rows, []string{ReportPeriodLabel(q.Group, r.Period), services.CSVText(r.Tier), services.CSVText(r.Region),
			strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.Tokens, 10), f(r.EnergyKWh), f(r.MeasuredKWh),
			f(r.SimulatedKWh), f(r.EstimatedKWh), f(r.GramsPerKWh), f(r.PUE), f(r.GCO2e), f(r.BaselineKWh), f(r.BaselineGCO2e),
			services.CSVText(r.MethodVersion)})
	}
	return writeReportCSV(c, "carbon", q, rows)
}

func writeReportCSV(c echo.Context, name string, q reports.Query, rows [][]string) error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		return err
	}
	v := reportQueryValues(q)
	res := c.Response()
	res.Header().Set(echo.HeaderContentDisposition,
		fmt.Sprintf(`attachment; filename="gpumarket-%s-%s-to-%s.csv"`, name, v.Get("from"), v.Get("to")))
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", []byte(b.String()))
}
