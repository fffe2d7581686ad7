package simulation

import (
	"testing"
)

func TestProfilesHoldEveryRun(t *testing.T) {
	t.Parallel()
	ps := Profiles()
	runs := 0
	for _, p := range ps {
		runs += len(p.Levels)
		if p.IsZero() || p.Model == "" || (p.GPU != "h100-pcie" && p.GPU != "rtx-4090") || p.Count < 1 {
			t.Errorf("malformed profile %+v", p)
		}
	}
	if len(ps) != 24 || runs != 130 {
		t.Fatalf("got %d profiles of %d runs, want 24 of 130", len(ps), runs)
	}
	p, ok := Lookup("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "h100-pcie", 1)
	if !ok || len(p.Levels) != 10 {
		t.Fatalf("14B on 1x H100: %v, %d levels, want 10 (two runs at each of five rates)", ok, len(p.Levels))
	}
	// The figures of the paper's headline: P99 54.41 ms at 16 requests/s, 211 ms at 32.
	if l := p.Levels[6]; l.QPS != 16 || l.Run != 0 || l.TTFTP99Ms != 54.41 || l.MeanOutputTokens != 208.52 {
		t.Errorf("16 qps run 0 = %+v", l)
	}
}

func TestProfilesIsACopy(t *testing.T) {
	t.Parallel()
	Profiles()[0].Levels[0].TTFTP50Ms = 1e9
	if Profiles()[0].Levels[0].TTFTP50Ms == 1e9 {
		t.Fatal("a caller changed the embedded profiles")
	}
}

func TestParseProfilesRefusesBadTables(t *testing.T) {
	t.Parallel()
	header := "model,gpu,gpu_count,qps,run,req_s,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,total_tps,mean_input_tokens,mean_output_tokens\n"
	for name, text := range map[string]string{
		"wrong header":        "model,gpu\nm,g\n",
		"percentiles crossed": header + "m,rtx-4090,1,1,0,1,50,40,60,10,11,400,200,200\n",
		"not a number":        header + "m,rtx-4090,1,1,0,x,30,40,60,10,11,400,200,200\n",
		"rates out of order": header + "m,rtx-4090,1,4,0,1,30,40,60,10,11,400,200,200\n" +
			"m,rtx-4090,1,1,0,1,30,40,60,10,11,400,200,200\n",
		"runs apart": header + "m,rtx-4090,1,1,0,1,30,40,60,10,11,400,200,200\n" +
			"n,rtx-4090,1,1,0,1,30,40,60,10,11,400,200,200\n" +
			"m,rtx-4090,1,4,0,1,30,40,60,10,11,400,200,200\n",
	} {
		if _, err := parseProfiles(text); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
