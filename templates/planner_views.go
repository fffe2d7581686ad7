package templates

// PlannerPage is the fleet planner: a workload's form, its plan, and the benchmark's sweet spots.
type PlannerPage struct {
	Page
	Form        Form
	Models      []Option
	BenchModels []Option
	Result      *PlanView
	Bench       []SweetSpotView
	BenchModel  string
	BenchTarget string
}

// PlanView is a plan as the page shows it; money exact, energy and carbon rounded.
type PlanView struct {
	Parts                         []PlanPartView
	Cost, Energy, Carbon          string
	AllCost, AllEnergy, AllCarbon string
	Savings, SavingsPercent       string
	CarbonSaved                   string
	Budget                        string
	OverBudget                    bool
	Considered                    int
	Method                        string
}

// PlanPartView is one tier's share of a plan.
type PlanPartView struct {
	Need, Tier, Tokens, Price, Cost, Energy, Carbon, Note string
	Placements                                            []string
}

// SweetSpotView is one benchmark configuration's sweet spot and loads.
type SweetSpotView struct {
	Config, Rate, Cost, P99, Why, Breaks, Heaviest string
	Loads                                          []LoadView
}

// LoadView is one offered load of a configuration.
type LoadView struct {
	Rate, P99, TPS, Cost string
	Meets, Spot          bool
}
