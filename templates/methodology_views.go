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
	Rows                                                       []MethodReferenceRow
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
	ConsumerPowerW                        string
	AdvantagePaper, AdvantageRated        string // the enterprise card's advantage per token
	GramsConsumer, GramsPaper, GramsRated string // gCO2e per million tokens on GridName
	GridName, GridGCO2ePerKWh             string
	USDPerGPUHour                         string
	TwoXUSDPerMTok, TwoXRequestsPerS      string
	FourXUSDPerMTok, FourXRequestsPerS    string
	TwoXTPS, FourXTPS                     string
}
