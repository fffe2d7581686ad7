package templates

// BudgetsPage is an account's limits beyond its keys' own: each person's limit on the keys they
// created, the account's monthly budget, and the balance alert.
type BudgetsPage struct {
	Page
	Members []MemberLimitRow
	// People are whom a member limit may be set for.
	People  []Option
	Periods []Option
	Budget  *BudgetRow // nil without a budget
	// CreditLowUSD is the balance alert's amount, "" for none.
	CreditLowUSD string
	Form         Form
	// BudgetMail and CreditLowMail say whether the signed-in person gets those alerts' e-mail.
	BudgetMail, CreditLowMail bool
}

// MemberLimitRow is a person's limit with what their keys spent in its period.
type MemberLimitRow struct {
	UserID, Email         string
	Limit, Period, Spent  string
	Remaining, Thresholds string
}

// BudgetRow is the account's monthly budget with what its keys spent this month.
type BudgetRow struct {
	Limit, Spent, Remaining, Thresholds string
}
