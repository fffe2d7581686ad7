package templates

import "strings"

// navGroup is a group of the header's links: the public pages, then one for each part of the
// site a role works in. The header shows a group's links that its reader may open.
type navGroup struct {
	Label  string // names the group for screen readers and in the folded menu; "" for the public pages
	Public bool   // the public pages, which everyone may open
	Links  []navLink
}

// navLink is one link of the header.
type navLink struct {
	Href, Label, TestID string
	// Also are other paths under which the link is the page in use, beside Href and what lies under it.
	Also []string
	// SignedIn marks a link of the public group that only a signed-in reader has (the home): the
	// access table answers for it as for the other groups' links.
	SignedIn bool
}

// navGroups are the header's links, by group. Which of them a reader sees is the access table's
// answer for its path (Page.MayView), so the header never links a page that would refuse it.
var navGroups = []navGroup{
	{Public: true, Links: []navLink{
		{Href: "/home", Label: "Home", TestID: "nav-home", SignedIn: true},
		{Href: "/catalog", Label: "Catalog", TestID: "nav-catalog"},
		{Href: "/calculator", Label: "Calculator", TestID: "nav-calculator"},
		{Href: "/planner", Label: "Planner", TestID: "nav-planner"},
	}},
	{Label: "Account", Links: []navLink{
		{Href: "/credits", Label: "Credits", TestID: "nav-credits"},
		{Href: "/usage", Label: "Usage", TestID: "nav-usage"},
		{Href: "/batches", Label: "Batches", TestID: "nav-batches"},
		{Href: "/keys", Label: "API keys", TestID: "nav-keys"},
		{Href: "/invoices", Label: "Invoices", TestID: "nav-invoices"},
		{Href: "/reports", Label: "Reports", TestID: "nav-reports"},
	}},
	{Label: "Provider", Links: []navLink{
		{Href: "/provider/rigs", Label: "My rigs", TestID: "nav-rigs"},
		{Href: "/provider/earnings", Label: "Earnings", TestID: "nav-earnings"},
		{Href: "/provider/performance", Label: "Performance", TestID: "nav-performance"},
		{Href: "/provider/payouts", Label: "Payouts", TestID: "nav-payouts"},
		{Href: "/provider/statements", Label: "Statements", TestID: "nav-statements"},
	}},
	{Label: "Finance", Links: []navLink{
		{Href: "/finance/balances", Label: "Balances", TestID: "nav-finance"},
		{Href: "/finance/prices", Label: "Price book", TestID: "nav-prices"},
		{Href: "/finance/invoices", Label: "Invoices", TestID: "nav-finance-invoices", Also: []string{"/finance/close"}},
		{Href: "/finance/statements", Label: "Statements", TestID: "nav-finance-statements"},
		{Href: "/finance/payouts", Label: "Payouts", TestID: "nav-finance-payouts"},
		{Href: "/finance/audit", Label: "Audit", TestID: "nav-finance-audit"},
	}},
	{Label: "Admin", Links: []navLink{
		{Href: "/admin/users", Label: "Users", TestID: "nav-users"},
		{Href: "/admin/discrepancies", Label: "Discrepancies", TestID: "nav-discrepancies"},
		{Href: "/admin/rig-reports", Label: "Rig reports", TestID: "nav-rig-reports"},
		{Href: "/admin/batches", Label: "Batch queue", TestID: "nav-batch-queue"},
	}},
}

// visibleNav is the groups of links the page's reader may open, each with only those links;
// a group left with none is left out.
func visibleNav(p Page) []navGroup {
	var out []navGroup
	for _, g := range navGroups {
		var links []navLink
		for _, l := range g.Links {
			if (g.Public && !l.SignedIn) || (p.MayView != nil && p.MayView(l.Href)) {
				links = append(links, l)
			}
		}
		if len(links) > 0 {
			g.Links = links
			out = append(out, g)
		}
	}
	return out
}

// active reports whether the link is the page at path, or a page under it.
func (l navLink) active(path string) bool {
	for _, h := range append([]string{l.Href}, l.Also...) {
		if path == h || strings.HasPrefix(path, h+"/") {
			return true
		}
	}
	return false
}
