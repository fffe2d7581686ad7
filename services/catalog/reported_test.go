package catalog

import (
	"testing"
)

// TestARigsOwnFiguresAreFlaggedWhenFarBetterThanTheGateways: a rig reporting under half the gateway's
// P99, or over twice its throughput, over at least MinMeasuredRequests requests on both sides.
func TestARigsOwnFiguresAreFlaggedWhenFarBetterThanTheGateways(t *testing.T) {
	t.Parallel()
	o := func(measuredN, reportedN int64, measuredP99, reportedP99, measuredTPS, reportedTPS float64) Offering {
		return Offering{MeasuredRequests: measuredN, MeasuredTTFTP99Ms: f(measuredP99), MeasuredTokensPerSec: f(measuredTPS),
			ReportedRequests: reportedN, ReportedTTFTP99Ms: f(reportedP99), ReportedTokensPerSec: f(reportedTPS)}
	}
	cases := []struct {
		name string
		o    Offering
		want string
	}{
		{"close figures", o(150, 150, 300, 280, 1000, 1100), ""},
		{"exactly half the P99", o(150, 150, 300, 150, 1000, 1000), ""},
		{"under half the P99", o(150, 150, 300, 40, 1000, 1000),
			"The rig reports a P99 time to first token of 40.0 ms, under half the 300.0 ms the gateway measured."},
		{"over twice the throughput", o(100, 100, 300, 290, 1000, 2000.5),
			"The rig reports 2000.5 tokens per second, over twice the 1000.0 the gateway measured."},
		{"both", o(100, 100, 448.04, 20, 1858.57, 9000),
			"The rig reports a P99 time to first token of 20.0 ms, under half the 448.0 ms the gateway measured. " +
				"The rig reports 9000.0 tokens per second, over twice the 1858.6 the gateway measured."},
		{"too few reported", o(150, MinMeasuredRequests-1, 300, 40, 1000, 1000), ""},
		{"too few measured", o(MinMeasuredRequests-1, 150, 300, 40, 1000, 1000), ""},
		{"slower than the gateway says", o(150, 150, 40, 300, 1000, 100), ""},
	}
	for _, c := range cases {
		if got := c.o.ReportDivergence(); got != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestAdminsSeeEveryProvidersDivergentRigs: ListDivergent holds the rigs flagged, of any provider,
// and none other.
func TestAdminsSeeEveryProvidersDivergentRigs(t *testing.T) {
	t.Parallel()
	s, ctx, newAccount := setup(t)
	fjord, lisboa := newAccount("Fjord"), newAccount("Lisboa")
	honest, err := s.Create(ctx, fjord, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	liar, err := s.Create(ctx, lisboa, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := s.Create(ctx, lisboa, rig("m", 100_000, f(300)))
	if err != nil {
		t.Fatal(err)
	}
	set := func(id string, measuredN, reportedN int64, measuredP99, reportedP99 float64) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, `UPDATE offerings SET measured_requests = $2, measured_ttft_p99_ms = $4,
			reported_requests = $3, reported_ttft_p99_ms = $5 WHERE id = $1`, id, measuredN, reportedN, measuredP99, reportedP99); err != nil {
			t.Fatal(err)
		}
	}
	set(honest.ID, 500, 500, 300, 290)
	set(liar.ID, 500, 500, 300, 40)
	set(quiet.ID, 500, 99, 300, 40)
	got, err := s.ListDivergent(ctx)
	if err != nil || len(got) != 1 || got[0].ID != liar.ID || got[0].ProviderName != "Lisboa" {
		t.Fatalf("ListDivergent = %+v, %v; want only the rig reporting 40 ms against the gateway's 300", got, err)
	}
}
