package routing

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// of gives an offering a provider's display name.
func of(o catalog.Offering, provider string) catalog.Offering {
	o.ProviderName = provider
	return o
}

// on gives an offering a GPU, a count and a region.
func on(o catalog.Offering, gpu string, count int, region string) catalog.Offering {
	o.GPU, o.GPUCount, o.Region = gpu, count, region
	return o
}

func usd(s string) *money.MicroUSD {
	m, err := money.ParseMicroUSD(s)
	if err != nil {
		panic(err)
	}
	return &m
}

// TestPreferencesNarrowAndOrderTheCandidates: each field of the provider object and gpumarket's own rules, one at
// a time. Acme's one offering asks least; Lisboa's two more, more than 5% apart, so that the order is by ask with
// no draw unless a field changes it. Acme's is an RTX 4090 rig in Poland, Lisboa's an H100 in Norway and an RTX 4090
// in France.
func TestPreferencesNarrowAndOrderTheCandidates(t *testing.T) {
	t.Parallel()
	acme := on(of(claims(offering("acme-1", "m", st, 100_000), 300, 600), "Acme Compute"), "rtx-4090", 4, "pl")
	lisboa1 := on(of(claims(offering("lisboa-1", "m", st, 150_000), 100, 200), "Lisboa"), "h100-sxm", 1, "no")
	lisboa2 := on(of(claims(offering("lisboa-2", "m", st, 200_000), 200, 400), "Lisboa"), "rtx-4090", 2, "fr")
	acme.ClaimedTokensPerSec, lisboa1.ClaimedTokensPerSec = f64(500), f64(2000) // lisboa-2's is unknown
	fast := of(offering("fast", "m", rt, 100_000), "Acme Compute")
	cases := []struct {
		name  string
		prefs Preferences
		want  []string
	}{
		{"nothing said: by ask", Preferences{}, []string{"acme-1", "lisboa-1", "lisboa-2"}},
		{"only a provider, by its display name", Preferences{Only: []string{"Lisboa"}}, []string{"lisboa-1", "lisboa-2"}},
		{"only a provider, case and punctuation aside", Preferences{Only: []string{"acme-compute"}}, []string{"acme-1"}},
		{"only an offering, by id", Preferences{Only: []string{"lisboa-2"}}, []string{"lisboa-2"}},
		{"ignore a provider", Preferences{Ignore: []string{"ACME COMPUTE"}}, []string{"lisboa-1", "lisboa-2"}},
		{"ignore an offering", Preferences{Ignore: []string{"lisboa-1"}}, []string{"acme-1", "lisboa-2"}},
		{"order a provider first, the others after", Preferences{Order: []string{"Lisboa"}}, []string{"lisboa-1", "lisboa-2", "acme-1"}},
		{"order entry by entry", Preferences{Order: []string{"lisboa-2", "Acme Compute"}}, []string{"lisboa-2", "acme-1", "lisboa-1"}},
		{"order without fallbacks: only the entries", Preferences{Order: []string{"lisboa-2", "Acme Compute"}, NoFallbacks: true},
			[]string{"lisboa-2", "acme-1"}},
		{"an entry of the order that names nothing, with fallbacks", Preferences{Order: []string{"Nobody", "lisboa-2"}},
			[]string{"lisboa-2", "acme-1", "lisboa-1"}},
		{"no fallbacks: the first choice alone", Preferences{NoFallbacks: true}, []string{"acme-1"}},
		{"sort by throughput, unknown last", Preferences{Sort: SortThroughput}, []string{"lisboa-1", "acme-1", "lisboa-2"}},
		{"sort by latency", Preferences{Sort: SortLatency}, []string{"lisboa-1", "lisboa-2", "acme-1"}},
		{"sort by price", Preferences{Sort: SortPrice}, []string{"acme-1", "lisboa-1", "lisboa-2"}},
		{"sort within the order's entries", Preferences{Order: []string{"Lisboa"}, Sort: SortLatency, NoFallbacks: true},
			[]string{"lisboa-1", "lisboa-2"}},
		{"max price at the tier's price", Preferences{MaxPromptPrice: usd("0.15"), MaxCompletionPrice: usd("0.30")},
			[]string{"acme-1", "lisboa-1", "lisboa-2"}},
		{"enterprise hardware", Preferences{HardwareClass: HardwareEnterprise}, []string{"lisboa-1"}},
		{"consumer hardware", Preferences{HardwareClass: HardwareConsumer}, []string{"acme-1", "lisboa-2"}},
		{"a region", Preferences{Regions: []string{"fr"}}, []string{"lisboa-2"}},
		{"regions", Preferences{Regions: []string{"fr", "pl"}}, []string{"acme-1", "lisboa-2"}},
		{"only and a class together", Preferences{Only: []string{"Lisboa"}, HardwareClass: HardwareConsumer}, []string{"lisboa-2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, acme, lisboa1, lisboa2, fast)
			prefs := c.prefs
			if got := b.pickIDs(t, Request{Model: "m", Preferences: &prefs}); !slices.Equal(got, c.want) {
				t.Fatalf("Pick = %v, want %v", got, c.want)
			}
		})
	}
}

// TestAnExplicitSortHasNoDraw: two offerings within 5% of each other, the dearer one faster. Routing's own order
// gives the first place to the faster of the two now and then (the power of two choices); a sort by price always
// to the cheaper, and a sort by latency always to the faster, as does the live window once it says so.
func TestAnExplicitSortHasNoDraw(t *testing.T) {
	t.Parallel()
	cheap, near := claims(offering("cheap", "m", st, 100_000), 400, 800), claims(offering("near", "m", st, 104_000), 100, 200)
	b := setup(t, cheap, near)
	firsts := map[string]int{}
	for range 200 {
		firsts[b.pickIDs(t, Request{Model: "m"})[0]]++
		if got := b.pickIDs(t, Request{Model: "m", Preferences: &Preferences{Sort: SortPrice}}); !slices.Equal(got, []string{"cheap", "near"}) {
			t.Fatalf("sorted by price: %v", got)
		}
		if got := b.pickIDs(t, Request{Model: "m", Preferences: &Preferences{Sort: SortLatency}}); !slices.Equal(got, []string{"near", "cheap"}) {
			t.Fatalf("sorted by latency: %v", got)
		}
	}
	if firsts["near"] == 0 {
		t.Fatalf("routing's own order never put the faster near-equal first: %v", firsts)
	}
	// Measured traffic replaces the claims: the near one turns out slow.
	b.observe("near", minLiveSamples, 2000)
	b.clock.Advance(2 * figuresTTL)
	if got := b.pickIDs(t, Request{Model: "m", Preferences: &Preferences{Sort: SortLatency}}); !slices.Equal(got, []string{"cheap", "near"}) {
		t.Fatalf("sorted by latency after the near one was measured slow: %v", got)
	}
}

// TestSortByThroughputGoesByTheLiveWindow: once the window holds catalog.MinMeasuredRequests requests, its tokens
// per second replace the claimed figure.
func TestSortByThroughputGoesByTheLiveWindow(t *testing.T) {
	t.Parallel()
	a, z := offering("a", "m", st, 100_000), offering("z", "m", st, 150_000)
	a.ClaimedTokensPerSec, z.ClaimedTokensPerSec = f64(1000), f64(900)
	b := setup(t, a, z)
	sorted := Request{Model: "m", Preferences: &Preferences{Sort: SortThroughput}}
	if got := b.pickIDs(t, sorted); !slices.Equal(got, []string{"a", "z"}) {
		t.Fatalf("by the claims: %v", got)
	}
	// 100 requests of 200 tokens, each taking 1.1 s, all ending now: 20,000 tokens over 1.1 s busy, ~18,000/s.
	b.observe("z", catalog.MinMeasuredRequests, 100)
	b.clock.Advance(2 * figuresTTL)
	if got := b.pickIDs(t, sorted); !slices.Equal(got, []string{"z", "a"}) {
		t.Fatalf("by the live window: %v", got)
	}
}

// TestMaxPriceCapsWhatTheRequestPays: provider.max_price is what the customer pays per million prompt and
// completion tokens, the tier's price in force (standard $0.15 and $0.30), whoever serves; gpumarket's own
// max_price_per_mtok caps the provider's blended ask.
func TestMaxPriceCapsWhatTheRequestPays(t *testing.T) {
	t.Parallel()
	b := setup(t, offering("a", "m", st, 100_000), offering("f", "m", rt, 100_000))
	for _, c := range []struct {
		name  string
		req   Request
		field string
	}{
		{"prompt under the price", Request{Model: "m", Preferences: &Preferences{MaxPromptPrice: usd("0.149999")}}, "provider.max_price.prompt"},
		{"completion under the price", Request{Model: "m", Preferences: &Preferences{MaxCompletionPrice: usd("0.29")}}, "provider.max_price.completion"},
		{"zero admits only a free tier", Request{Model: "m", Preferences: &Preferences{MaxPromptPrice: usd("0")}}, "provider.max_price.prompt"},
		{"realtime costs more", Request{Model: "m", Tier: rt, Preferences: &Preferences{MaxPromptPrice: usd("0.15")}}, "provider.max_price.prompt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantPreferenceError(t, b.r, c.req, services.CodeUnavailable, c.field)
		})
	}
	if got := b.pickIDs(t, Request{Model: "m", Tier: rt, Preferences: &Preferences{MaxPromptPrice: usd("0.30"), MaxCompletionPrice: usd("0.60")}}); !slices.Equal(got, []string{"f"}) {
		t.Fatalf("realtime at its own price: %v", got)
	}
}

// TestCarbonCapGoesByTheEstimate: the rigs of pickTest's carbon cases, 4x RTX 4090 at 1858.57 tokens/s, are
// estimated at 1800 W / 1858.57 tokens/s x the grid: 8.07 g per million tokens in Norway, 178.1 in Poland. A rig
// without an estimate is not shown to be under any cap.
func TestCarbonCapGoesByTheEstimate(t *testing.T) {
	t.Parallel()
	perMTok := func(grid float64) float64 { return 1800 / 1858.57 / 3.6 * grid }
	if math.Abs(perMTok(30)-8.0706) > 1e-3 {
		t.Fatalf("Norway's estimate %g", perMTok(30))
	}
	b := setup(t, rig("poland", "pl", st, 100_000), rig("norway", "no", st, 200_000), offering("unknown", "m", st, 120_000))
	capped := func(g float64) Request { return Request{Model: "m", Preferences: &Preferences{MaxGCO2ePerMTok: g}} }
	if got := b.pickIDs(t, capped(perMTok(662)*1.0001)); !slices.Equal(got, []string{"poland", "norway"}) {
		t.Fatalf("cap at Poland's estimate: %v", got)
	}
	if got := b.pickIDs(t, capped(perMTok(30)*1.0001)); !slices.Equal(got, []string{"norway"}) {
		t.Fatalf("cap at Norway's estimate: %v", got)
	}
	wantPreferenceError(t, b.r, capped(perMTok(30)*0.99), services.CodeUnavailable, "gpumarket.max_gco2e_per_mtok")
}

// TestImpossiblePreferencesNameTheirField: a combination that can leave no offering is refused with the field
// that made it so: names that name nothing (404), preferences that contradict each other (400), rules no
// offering meets now (503).
func TestImpossiblePreferencesNameTheirField(t *testing.T) {
	t.Parallel()
	acme := on(of(offering("acme-1", "m", st, 100_000), "Acme"), "rtx-4090", 4, "pl")
	lisboa := on(of(offering("lisboa-1", "m", st, 150_000), "Lisboa"), "rtx-4090", 4, "pl")
	fast := of(offering("fast", "m", rt, 100_000), "Fast")
	other := of(offering("other-1", "m2", st, 100_000), "Other")
	b := setup(t, acme, lisboa, fast, other)
	for _, c := range []struct {
		name  string
		prefs Preferences
		code  services.Code
		field string
	}{
		{"only names no provider of the model", Preferences{Only: []string{"Nobody", "Other"}}, services.CodeNotFound, "provider.only"},
		{"no fallbacks and an order naming an unknown provider", Preferences{Order: []string{"Acme", "Nobody"}, NoFallbacks: true},
			services.CodeNotFound, "provider.order"},
		{"only and ignore name the same provider", Preferences{Only: []string{"Acme"}, Ignore: []string{"acme"}}, services.CodeInvalid, "provider.ignore"},
		{"ignore drops, by id, every offering only keeps by name", Preferences{Only: []string{"Lisboa"}, Ignore: []string{"lisboa-1"}},
			services.CodeInvalid, "provider.ignore"},
		{"no fallbacks and an order the ignore list drops", Preferences{Order: []string{"Acme"}, Ignore: []string{"Acme"}, NoFallbacks: true},
			services.CodeInvalid, "provider.order"},
		{"only an offering of another tier", Preferences{Only: []string{"Fast"}}, services.CodeUnavailable, "provider.only"},
		{"no fallbacks and an order of another tier", Preferences{Order: []string{"Fast"}, NoFallbacks: true}, services.CodeUnavailable, "provider.order"},
		{"ignore everyone", Preferences{Ignore: []string{"Acme", "Lisboa"}}, services.CodeUnavailable, "provider.ignore"},
		{"a class no offering has", Preferences{HardwareClass: HardwareEnterprise}, services.CodeUnavailable, "gpumarket.hardware_class"},
		{"a region no offering is in", Preferences{Regions: []string{"no"}}, services.CodeUnavailable, "gpumarket.region"},
		{"an unknown region", Preferences{Regions: []string{"mars"}}, services.CodeInvalid, "gpumarket.region"},
		{"an unknown class", Preferences{HardwareClass: "datacenter"}, services.CodeInvalid, "gpumarket.hardware_class"},
		{"an unknown sort", Preferences{Sort: "cheapest"}, services.CodeInvalid, "provider.sort"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefs := c.prefs
			wantPreferenceError(t, b.r, Request{Model: "m", Preferences: &prefs}, c.code, c.field)
		})
	}
	// The preferences never admit what the caps refuse.
	wantPickError(t, b.r, Request{Model: "m", MaxPricePerMTok: 99_000, Preferences: &Preferences{Only: []string{"Acme"}}}, ErrOverCaps, services.CodeUnavailable)
}

// wantPreferenceError checks that Pick fails with the code and names the field.
func wantPreferenceError(t *testing.T, r *Router, req Request, code services.Code, field string) {
	t.Helper()
	cs, err := r.Pick(req)
	var ae *services.Error
	if !errors.As(err, &ae) || ae.Code != code {
		t.Fatalf("Pick = %v, %v; want %s", ids(cs), err, code)
	}
	if _, ok := ae.Fields[field]; !ok || len(ae.Fields) != 1 {
		t.Fatalf("Pick failed on %v (%s), want the field %s", ae.Fields, ae.Message, field)
	}
	if code != services.CodeInvalid && !errors.Is(err, ErrPreferences) {
		t.Fatalf("Pick = %v, want ErrPreferences", err)
	}
	if !strings.Contains(ae.Fields[field], field) {
		t.Errorf("the problem %q does not name %s", ae.Fields[field], field)
	}
}

func TestNameKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Lisboa Compute": "lisboa-compute", " lisboa-compute ": "lisboa-compute",
		"LISBOA__COMPUTE!": "lisboa-compute", "Café 42": "café-42", "--": ""} {
		if got := nameKey(in); got != want {
			t.Errorf("nameKey(%q) = %q, want %q", in, got, want)
		}
	}
}
