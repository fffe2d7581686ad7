package templates

// ReliabilityCell is an offering's reliability record, preformatted (web/reliability.go): each figure with what
// it rests on, or, below the warm-up, "not enough traffic yet" and how many requests there were.
type ReliabilityCell struct {
	Uptime      string // "97.00%"; "" below the warm-up
	UptimeBasis string // "over 100 requests in the last day, 5 rate limited"
	Routing     string // how routing treats it when below 95%; "" otherwise
	TTFT        string // "P50 120.0 ms · P90 300.0 ms · P99 800.0 ms"; "" below the warm-up
	TTFTBasis   string
	TPS         string // output tokens per second, "P50 42.0 · P90 ... tokens/s"; "" below the warm-up
	TPSBasis    string
}
