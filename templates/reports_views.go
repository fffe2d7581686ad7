package templates

// ReportsPage is a customer's dashboard of savings, energy and carbon over a period.
type ReportsPage struct {
	Page
	// From, To (UTC dates, both included) and Group ("day", "month") are the period as the
	// form shows it; Errors names the fields the form must correct.
	From, To, Group string
	Errors          map[string]string
	MethodVersion   string
	Totals          []ReportFigure
	Charts          []ChartView
	// SavingsCSV and CarbonCSV export the reports' rows for the same period.
	SavingsCSV, CarbonCSV string
	// Shortcuts are the periods asked for most, as links.
	Shortcuts []ReportLink
}

// ReportLink is a link to the dashboard for a period.
type ReportLink struct {
	Label, URL string
}

// ReportFigure is one headline figure, linked to the method behind it.
type ReportFigure struct {
	ID, Label, Value, MethodURL string
}
