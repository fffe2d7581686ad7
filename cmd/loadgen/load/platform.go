package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/money"
)

// Method names the way a run measures, for a result read elsewhere (a listing it is attached to):
// the arrival schedule, what a success is, how TTFT, TPOT, latency and throughput are taken and
// how percentiles are interpolated, as the package comment describes them. It changes whenever
// one of those does, so that two results of the same method can be set side by side.
const Method = "gpumarket-loadgen/1"

// Version is the build of loadgen that ran: its module version, else its VCS revision, else
// "devel".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return rev[:min(12, len(rev))] + dirty
}

// listedOffering is what a run reads of the pinned offering in the platform's public catalog.
type listedOffering struct {
	ID          string         `json:"id"`
	Model       string         `json:"model"`
	Tier        string         `json:"tier"`
	InputPrice  money.MicroUSD `json:"tier_input_usd_per_mtok"`
	OutputPrice money.MicroUSD `json:"tier_output_usd_per_mtok"`
	source      string         // the address it was read from
}

// catalogURL is where the platform publishes an offering, beside the gateway's /v1: the
// catalog's GET /api/offerings/{id}. It is "" when the base URL does not end in /v1.
func catalogURL(base, offering string) string {
	root, ok := strings.CutSuffix(base, "/v1")
	if !ok {
		return ""
	}
	return root + "/api/offerings/" + offering
}

// catalogOffering reads the pinned offering from the platform's public catalog: its model,
// and its tier's prices, which are what a customer pays per million tokens.
func catalogOffering(ctx context.Context, client *http.Client, base, offering string) (*listedOffering, error) {
	addr := catalogURL(base, offering)
	if addr == "" {
		return nil, fmt.Errorf("load: %s is not the platform's gateway (…/v1): the offering's price cannot be read", base)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr, nil)
	if err != nil {
		return nil, fmt.Errorf("load: read the offering: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("load: read the offering from the catalog: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("load: GET %s answered %s: the offering is not in the public catalog", addr, resp.Status)
	}
	var o listedOffering
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return nil, fmt.Errorf("load: GET %s: %w", addr, err)
	}
	if o.ID != offering || o.Model == "" {
		return nil, fmt.Errorf("load: GET %s does not describe offering %s", addr, offering)
	}
	o.source = addr
	return &o, nil
}

// PlatformCost is what the run's tokens cost a customer of the platform: the tokens each
// answer's usage reported, at the prices the catalog publishes for the offering's tier, by the
// meter's rule (a request that produced no output token is charged nothing). The gateway's
// answers do not carry their charge, so this is a computation from published prices, not an
// invoice: Basis says so. Money is exact: picodollars and micro-dollars per million tokens.
type PlatformCost struct {
	Basis       string         `json:"basis"`
	Source      string         `json:"source"` // where the prices were read
	Tier        string         `json:"tier"`
	InputPrice  money.MicroUSD `json:"input_usd_per_M"`
	OutputPrice money.MicroUSD `json:"output_usd_per_M"`
	// Requests are the successes priced: those whose usage was reported.
	Requests     int            `json:"requests"`
	ChargePico   money.Pico     `json:"charge_pico"`
	ChargeUSD    string         `json:"charge_usd"` // ChargePico in dollars, exactly
	USDPerMTotal money.MicroUSD `json:"usd_per_M_total"`
	// USDPerMOutput is the whole charge over the output tokens alone, as usd_per_M_output is.
	USDPerMOutput money.MicroUSD `json:"usd_per_M_output"`
}

// platformBasis is PlatformCost.Basis.
const platformBasis = "each answer's reported usage x the tier's price the platform's catalog publishes; computed, not invoiced"

// platformCost prices the successful samples at the listed offering's tier prices; nil when
// there is no listing or a product does not fit in picodollars.
func platformCost(listed *listedOffering, samples []sample) *PlatformCost {
	if listed == nil {
		return nil
	}
	pc := &PlatformCost{Basis: platformBasis, Source: listed.source, Tier: listed.Tier,
		InputPrice: listed.InputPrice, OutputPrice: listed.OutputPrice}
	var tokens, output int64
	for _, s := range samples {
		if !s.ok || !s.usage {
			continue
		}
		pc.Requests++
		tokens += int64(s.inTokens + s.outTokens)
		output += int64(s.outTokens)
		if s.outTokens == 0 {
			continue // the meter charges a generation without output nothing
		}
		in, err1 := money.ChargeFor(int64(s.inTokens), listed.InputPrice)
		out, err2 := money.ChargeFor(int64(s.outTokens), listed.OutputPrice)
		sum, err3 := in.Add(out)
		total, err4 := pc.ChargePico.Add(sum)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil
		}
		pc.ChargePico = total
	}
	pc.ChargeUSD = pc.ChargePico.String()
	// A picodollar per token is a micro-dollar per million tokens.
	pc.USDPerMTotal, pc.USDPerMOutput = perToken(pc.ChargePico, tokens), perToken(pc.ChargePico, output)
	return pc
}

// perToken is charge over tokens in micro-dollars per million tokens, rounded half up; 0 for
// no tokens.
func perToken(charge money.Pico, tokens int64) money.MicroUSD {
	if tokens <= 0 {
		return 0
	}
	return money.MicroUSD((int64(charge) + tokens/2) / tokens)
}
