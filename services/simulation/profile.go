package simulation

import (
	"cmp"
	_ "embed"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Level is one benchmark run: what a GPU configuration measured at one offered request rate.
// Latencies are milliseconds, as the benchmark reports them.
type Level struct {
	QPS              float64 // offered Poisson request rate
	Run              int     // which run of this configuration and rate (0, or 1 for a repeat)
	ReqS             float64 // completed requests per second
	TTFTP50Ms        float64
	TTFTP90Ms        float64
	TTFTP99Ms        float64
	TPOTP50Ms        float64
	TPOTP99Ms        float64
	TotalTPS         float64 // input plus output tokens per second
	MeanInputTokens  float64 // per request
	MeanOutputTokens float64 // per request
}

// Concurrency is the mean number of requests in flight during the run, by Little's law: the
// completion rate times the mean request duration, which is the mean time to first token plus
// the mean output length times the mean time per output token, both means taken over the
// distributions the model draws from (see the package doc).
func (l Level) Concurrency() float64 {
	ttft := ttftQuantiles(l.TTFTP50Ms, l.TTFTP90Ms, l.TTFTP99Ms).mean()
	tpot := tpotQuantiles(l.TPOTP50Ms, l.TPOTP99Ms).mean()
	return l.ReqS * (ttft + l.MeanOutputTokens*tpot) / 1000
}

func (l Level) validate() error {
	for _, v := range []float64{l.QPS, l.ReqS, l.TTFTP50Ms, l.TPOTP50Ms, l.TotalTPS, l.MeanOutputTokens} {
		if !(v > 0) {
			return fmt.Errorf("non-positive figure at %g qps", l.QPS)
		}
	}
	if l.TTFTP50Ms > l.TTFTP90Ms || l.TTFTP90Ms > l.TTFTP99Ms || l.TPOTP50Ms > l.TPOTP99Ms {
		return fmt.Errorf("percentiles out of order at %g qps", l.QPS)
	}
	return nil
}

// Profile is a GPU configuration serving a model, with the load levels it was measured at.
// The zero-latency profile (Zero) has no levels.
type Profile struct {
	Model  string  // as the benchmark names it, e.g. deepseek-ai/DeepSeek-R1-Distill-Qwen-14B
	GPU    string  // catalog SKU: h100-pcie or rtx-4090
	Count  int     // GPUs in the rig
	Levels []Level // by offered rate, then run
}

// zeroMeanOutputTokens is the output length a zero-latency profile draws around when a request
// sets no limit: small, because it serves benchmarks of the gateway's own overhead.
const zeroMeanOutputTokens = 16

// Zero is the profile without latency: every sleep is zero. It stands for no GPU and serves
// whatever model the server is told to name.
func Zero() Profile { return Profile{} }

// IsZero reports whether the profile has no latency.
func (p Profile) IsZero() bool { return len(p.Levels) == 0 }

// String names the configuration as the catalog shows it, e.g. "1x h100-pcie
// deepseek-ai/DeepSeek-R1-Distill-Qwen-14B".
func (p Profile) String() string {
	if p.IsZero() {
		return "zero latency"
	}
	return fmt.Sprintf("%dx %s %s", p.Count, p.GPU, p.Model)
}

// MeanOutputTokens is the mean output length per request over the profile's runs, what a
// request without a token limit is sized around.
func (p Profile) MeanOutputTokens() float64 {
	if p.IsZero() {
		return zeroMeanOutputTokens
	}
	var sum float64
	for _, l := range p.Levels {
		sum += l.MeanOutputTokens
	}
	return sum / float64(len(p.Levels))
}

//go:embed profiles.csv
var profilesCSV string

var loadProfiles = sync.OnceValues(func() ([]Profile, error) { return parseProfiles(profilesCSV) })

// Profiles lists every measured configuration, by model, GPU and count. The table is embedded
// and checked by the package's tests, so a parse failure here is a build defect and panics.
func Profiles() []Profile {
	ps, err := loadProfiles()
	if err != nil {
		panic(err)
	}
	out := make([]Profile, len(ps))
	for i, p := range ps {
		out[i] = p
		out[i].Levels = slices.Clone(p.Levels)
	}
	return out
}

// Lookup finds the profile of a model on count GPUs of a SKU.
func Lookup(model, gpu string, count int) (Profile, bool) {
	for _, p := range Profiles() {
		if p.Model == model && p.GPU == gpu && p.Count == count {
			return p, true
		}
	}
	return Profile{}, false
}

var profileColumns = []string{
	"model", "gpu", "gpu_count", "qps", "run", "req_s", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms",
	"tpot_p50_ms", "tpot_p99_ms", "total_tps", "mean_input_tokens", "mean_output_tokens",
}

func parseProfiles(text string) ([]Profile, error) {
	cr := csv.NewReader(strings.NewReader(text))
	cr.Comment = '#'
	cr.FieldsPerRecord = len(profileColumns)
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("simulation: profiles.csv: %w", err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], profileColumns) {
		return nil, fmt.Errorf("simulation: profiles.csv: header is not %s", strings.Join(profileColumns, ","))
	}
	var out []Profile
	for i, rec := range recs[1:] {
		var errs []error
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			errs = append(errs, err)
			return v
		}
		count := int(num(rec[2]))
		l := Level{
			QPS: num(rec[3]), Run: int(num(rec[4])), ReqS: num(rec[5]),
			TTFTP50Ms: num(rec[6]), TTFTP90Ms: num(rec[7]), TTFTP99Ms: num(rec[8]),
			TPOTP50Ms: num(rec[9]), TPOTP99Ms: num(rec[10]), TotalTPS: num(rec[11]),
			MeanInputTokens: num(rec[12]), MeanOutputTokens: num(rec[13]),
		}
		errs = append(errs, l.validate())
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("simulation: profiles.csv record %d: %w", i+1, err)
			}
		}
		if n := len(out); n > 0 && out[n-1].Model == rec[0] && out[n-1].GPU == rec[1] && out[n-1].Count == count {
			out[n-1].Levels = append(out[n-1].Levels, l)
			continue
		}
		out = append(out, Profile{Model: rec[0], GPU: rec[1], Count: count, Levels: []Level{l}})
	}
	seen := map[string]bool{}
	for _, p := range out {
		if seen[p.String()] {
			return nil, fmt.Errorf("simulation: profiles.csv: %s: runs not together", p)
		}
		seen[p.String()] = true
		if !slices.IsSortedFunc(p.Levels, func(a, b Level) int {
			return cmp.Or(cmp.Compare(a.QPS, b.QPS), cmp.Compare(a.Run, b.Run))
		}) {
			return nil, fmt.Errorf("simulation: profiles.csv: %s: runs not in order of rate", p)
		}
	}
	return out, nil
}
