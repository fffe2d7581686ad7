package planner

import (
	"fmt"
	"math"
	"testing"
)

// The paper's sweet spots for DeepSeek-R1-Distill-Qwen-14B, and where each configuration
// stands at 32 requests/s.
func TestSweetSpotsReproduceThePaper(t *testing.T) {
	t.Parallel()
	type want struct {
		rate  float64
		cost  string // three decimals, as the paper prints
		stop  Stop
		p99At float64 // worst P99 at 32 requests/s
	}
	paper := map[string]want{
		"1x h100-pcie": {16, "0.185", StopSmallSaving, 211.4},
		"2x rtx-4090":  {4, "0.111", StopSmallSaving, 9361.48},
		"4x rtx-4090":  {8, "0.149", StopSmallSaving, 10011.37},
		"8x rtx-4090":  {8, "0.300", StopSmallSaving, 12212.05},
	}
	// Without a target, and with every target that the paper's own picks meet: the rule
	// gives the same spots.
	for _, target := range []float64{0, 639, 1000, 2000, 15000} {
		t.Run(fmt.Sprintf("target %g ms", target), func(t *testing.T) {
			spots := SweetSpots(BenchmarkModel, target)
			if len(spots) != 4 || spots[0].Name() != "1x h100-pcie" {
				t.Fatalf("got %d configurations, first %q; want 4, H100 first", len(spots), spots[0].Name())
			}
			for _, s := range spots {
				w, ok := paper[s.Name()]
				if !ok {
					t.Fatalf("unexpected configuration %s", s.Name())
				}
				at, ok := s.At()
				if target > 0 && target < 802.63 && s.Name() == "2x rtx-4090" {
					w.stop = StopOverTarget // its next load, 8 req/s at 802.63 ms, is over the target: the same spot
				}
				if !ok || at.RequestsPerSecond != w.rate || fmt.Sprintf("%.3f", at.USDPerMTok) != w.cost || s.Stop != w.stop {
					t.Errorf("%s: sweet spot %+v (%s), want %g req/s at $%s (%s)", s.Name(), at, s.Stop, w.rate, w.cost, w.stop)
				}
				if h := s.Heaviest(); h.RequestsPerSecond != 32 || h.TTFTP99Ms != w.p99At {
					t.Errorf("%s at its heaviest load: %+v, want P99 %g ms at 32 req/s", s.Name(), h, w.p99At)
				}
			}
		})
	}
	// Where they stop holding: every RTX 4090 setup is past 9 s at 32 requests/s, the H100
	// at 211 ms.
	for _, s := range SweetSpots(BenchmarkModel, 0) {
		h := s.Heaviest()
		if s.GPU == "rtx-4090" && h.TTFTP99Ms <= 9000 || s.GPU == "h100-pcie" && math.Abs(h.TTFTP99Ms-211.4) > 0.01 {
			t.Errorf("%s at 32 req/s: P99 %g ms", s.Name(), h.TTFTP99Ms)
		}
	}
}

// The target moves the spots: at the standard tier's 500 ms no 2x RTX 4090 load qualifies, and
// at the realtime tier's 55 ms the H100 steps back to 8 requests/s, because its second run at 16
// measured 56.03 ms.
func TestSweetSpotsUnderTierBounds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		target float64
		config string
		rate   float64 // 0: none
		stop   Stop
		breaks float64 // the lightest load above the spot over the target; 0: none
	}{
		{500, "2x rtx-4090", 0, StopNone, 0},
		{500, "4x rtx-4090", 8, StopSmallSaving, 32},
		{500, "8x rtx-4090", 8, StopSmallSaving, 32},
		{500, "1x h100-pcie", 16, StopSmallSaving, 0},
		{55, "1x h100-pcie", 8, StopOverTarget, 16},
		{55, "4x rtx-4090", 0, StopNone, 0},
		{1000, "2x rtx-4090", 4, StopSmallSaving, 16},
		{700, "2x rtx-4090", 4, StopOverTarget, 8},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s within %g ms", c.config, c.target), func(t *testing.T) {
			var got *SweetSpot
			for _, s := range SweetSpots(BenchmarkModel, c.target) {
				if s.Name() == c.config {
					got = &s
				}
			}
			if got == nil {
				t.Fatalf("no %s", c.config)
			}
			at, ok := got.At()
			if ok != (c.rate > 0) || at.RequestsPerSecond != c.rate || got.Stop != c.stop {
				t.Errorf("spot %+v %v (%s), want %g req/s (%s)", at, ok, got.Stop, c.rate, c.stop)
			}
			var breaks float64
			if got.BreaksAt >= 0 {
				breaks = got.Loads[got.BreaksAt].RequestsPerSecond
			}
			if breaks != c.breaks {
				t.Errorf("breaks at %g req/s, want %g", breaks, c.breaks)
			}
		})
	}
}

// The rule itself, on made-up loads.
func TestSweetSpotOf(t *testing.T) {
	t.Parallel()
	l := func(cost float64, meets bool) Load { return Load{USDPerMTok: cost, MeetsTarget: meets} }
	cases := []struct {
		name   string
		loads  []Load
		spot   int
		stop   Stop
		saving float64
	}{
		{"no load meets", []Load{l(1, false), l(0.5, false)}, -1, StopNone, 0},
		{"one load", []Load{l(1, true)}, 0, StopHeaviest, 0},
		{"each step saves enough", []Load{l(1, true), l(0.8, true), l(0.64, true)}, 2, StopHeaviest, 0},
		{"a step of exactly 20% is taken", []Load{l(1, true), l(0.8, true)}, 1, StopHeaviest, 0},
		{"a step of 19% is not", []Load{l(1, true), l(0.81, true)}, 0, StopSmallSaving, 19},
		{"a cheaper load over the target stops the walk", []Load{l(1, true), l(0.5, false), l(0.2, true)}, 0, StopOverTarget, 50},
		{"leading loads over the target are skipped", []Load{l(2, false), l(1, true), l(0.5, true)}, 2, StopHeaviest, 0},
		{"a dearer next load stops it", []Load{l(1, true), l(1.2, true)}, 0, StopSmallSaving, -20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spot, stop, saving, _ := SweetSpotOf(c.loads)
			if spot != c.spot || stop != c.stop || math.Abs(saving-c.saving) > 1e-9 {
				t.Errorf("SweetSpotOf = %d, %s, %g%%; want %d, %s, %g%%", spot, stop, saving, c.spot, c.stop, c.saving)
			}
		})
	}
}

// Repeated runs fold into one load: the worst P99 and the mean throughput.
func TestLoadsOfFoldsRuns(t *testing.T) {
	t.Parallel()
	spots := SweetSpots(BenchmarkModel, 0)
	h100 := spots[0]
	if len(h100.Loads) != 5 {
		t.Fatalf("1x H100 has %d loads, want 5", len(h100.Loads))
	}
	at16 := h100.Loads[3]
	if at16.Runs != 2 || at16.TTFTP99Ms != 56.03 || math.Abs(at16.TokensPerSecond-(3011.13+2981.65)/2) > 1e-9 {
		t.Errorf("16 req/s: %+v, want 2 runs, P99 56.03, mean throughput 2996.39", at16)
	}
}
