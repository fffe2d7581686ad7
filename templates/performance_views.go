package templates

// PerformancePage is the provider's view of its rigs over a window.
type PerformancePage struct {
	Page
	Days       string
	DayOptions []Option
	Window     string
	Error      string
	Rigs       []PerformanceRow
}

// PerformanceRow is one rig's figures, preformatted.
type PerformanceRow struct {
	ID, Rig, Model, Region, Tier, Status           string
	Requests, Tokens, InFlight, Utilisation        string
	TTFTClaimed, TTFTMeasured, TTFTVerdict         string
	TPSClaimed, TPSMeasured, TPSVerdict            string
	KWhPerMTok, MeasuredShare, EstimatedKWhPerMTok string
	Earned, EarnedPerKWh                           string
	Reliability                                    ReliabilityCell // as the public catalog shows it
}
