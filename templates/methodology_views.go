package templates

// MethodologyPage is the method behind every savings, energy and carbon figure, with every
// constant it uses, each written as the method holds it.
type MethodologyPage struct {
	Page
	MethodVersion                          string
	PUEHome, PUEDatacentre, PUEMin, PUEMax string
	PUESource                              string
	GPUs                                   []MethodGPU
	Regions                                []MethodRegion
	Reference                              MethodReference
	Corrections                            MethodCorrections
	// Embodied are the embodied line's assumptions, in words, from the method's constants.
	Embodied []string
}

// MethodGPU is a GPU model's board power and where it comes from.
type MethodGPU struct {
	SKU, Name, Class, BoardPowerW, Source string
}

// MethodRegion is a region's grid intensity, its year and source.
type MethodRegion struct {
	Code, Name, GCO2ePerKWh, Year, Source string
}

// MethodReference is the enterprise configuration the carbon baseline is computed on.
type MethodReference struct {
	GPU, BoardPowerW, RequestsPerSecond, Source, FallbackModel string
	// LoadSource is where the effect of load on energy per token is taken from.
	LoadSource string
	Rows       []MethodReferenceRow
	// Comparisons are the benchmark's other configurations against their model's reference.
	Comparisons []MethodComparisonRow
}

// MethodComparisonRow is one configuration the benchmark ran, against its model's reference at
// the same request rate: Factor is what its energy is multiplied by to make the baseline.
type MethodComparisonRow struct {
	Model, Configuration, JoulesPerToken, ReferenceJoulesPerToken, Factor string
}

// MethodReferenceRow is one model's reference run.
type MethodReferenceRow struct {
	Model, GPUCount, TokensPerSecond, JoulesPerToken string
}

// MethodCorrections are the benchmark paper's figures the platform corrects, worked out from
// the benchmark's own runs.
type MethodCorrections struct {
	Model                                 string
	PaperBoardPowerW, RatedBoardPowerW    string
	ReferenceTPS, ConsumerTPS             string
	ReferenceRate                         string // requests/s of the paper's enterprise run
	AdvantageEqual, EqualRate             string // the advantage at the same request rate
	ConsumerPowerW                        string
	AdvantagePaper, AdvantageRated        string // the enterprise card's advantage per token
	GramsConsumer, GramsPaper, GramsRated string // gCO2e per million tokens on GridName
	GridName, GridGCO2ePerKWh             string
	USDPerGPUHour                         string
	TwoXUSDPerMTok, TwoXRequestsPerS      string
	FourXUSDPerMTok, FourXRequestsPerS    string
	TwoXTPS, FourXTPS                     string
}
