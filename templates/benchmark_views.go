package templates

// ProviderBenchmark is what the catalog and the provider's pages show of the benchmark a
// provider attached to a listing: always labelled as the provider's own claim.
type ProviderBenchmark struct {
	// Figures is "p50 TTFT 182.0 ms, 2,410 tokens/s at 8 requests/s over 200 requests".
	Figures string
	Date    string // when the run started, "5 Dec 2026"
	// Elsewhere names where the run called when that was not the platform's gateway; "" when it was.
	Elsewhere string
	RawURL    string // the result as attached, as JSON
}

// RigBenchmarkPage is a rig's benchmark page: what the platform measured, what its provider
// attached, and the form that attaches a result.
type RigBenchmarkPage struct {
	Page
	Rig OfferingRow
	// Measured is what the platform measured of the rig, or why it has not yet.
	Measured string
	// Attached is the provider's result; nil when none is attached.
	Attached *ProviderBenchmark
	// Command runs loadgen against the listing through the platform's gateway.
	Command string
	Form    Form // "result": the pasted result, kept when it is refused
}
