package wire

import (
	"encoding/json"
	"testing"
)

func TestUsageOfReadsTheLastUsageMemberOfAValidAnswer(t *testing.T) {
	for _, c := range []struct {
		body    string
		in, out int64
		none    bool
	}{
		{body: `{"id":"x","choices":[{"message":{"content":"\"usage\":{}"}}],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}}`, in: 16, out: 8},
		{body: `{"usage":{"prompt_tokens":3,"completion_tokens":1},"usage":{"prompt_tokens":30,"completion_tokens":10}}`, in: 30, out: 10},
		{body: `{"usage":{"prompt_tokens":null,"completion_tokens":5}}`, in: 0, out: 5},
		{body: `{"usage":{"prompt_tokens":-4,"completion_tokens":5}}`, in: 0, out: 5}, // counted as none, never below
		{body: `{"usage":{"completion_tokens":5}}`, in: 0, out: 5},
		{body: `{"usage":{"prompt_tokens":1.5,"completion_tokens":5}}`, none: true},
		{body: `{"usage":{"prompt_tokens":"7","completion_tokens":5}}`, none: true},
		{body: `{"usage":{"prompt_tokens":99999999999999999999,"completion_tokens":5}}`, none: true},
		{body: `{"usage":null}`, none: true},
		{body: `{"usage":[1]}`, none: true},
		{body: `{"choices":[{"usage":{"prompt_tokens":1,"completion_tokens":1}}]}`, none: true},
		{body: `{"usage":{"prompt_tokens":1,"completion_tokens":1}`, none: true}, // cut short
		{body: `not json`, none: true},
	} {
		u := UsageOf([]byte(c.body))
		switch {
		case c.none && u != nil:
			t.Errorf("%s: usage %+v, want none", c.body, *u)
		case !c.none && (u == nil || u.Input != c.in || u.Output != c.out):
			t.Errorf("%s: usage %+v, want %d in, %d out", c.body, u, c.in, c.out)
		}
	}
}

// An answer of the gateway benchmark's size (make bench-gateway).
var benchAnswerBody = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764680000,"model":"gpumarket-bench/zero-latency","choices":[{"index":0,"message":{"role":"assistant","content":"A batch job tolerates minutes of queueing, so"},"finish_reason":"length"}],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}}`)

func BenchmarkUsageOf(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if UsageOf(benchAnswerBody) == nil {
			b.Fatal("no usage")
		}
	}
}

// WithCost puts the cost in an answer's usage member, after any cost the rig wrote there.
func TestWithCostTellsTheCostInTheUsage(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2}}`, `{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"cost":0.000005400000}}`},
		{`{"usage":{}}`, `{"usage":{"cost":0.000005400000}}`},
		{`{"usage": {"cost": 9, "prompt_tokens": 1} , "x": 1}`, `{"usage": {"cost": 9, "prompt_tokens": 1,"cost":0.000005400000} , "x": 1}`},
		{`{"usage":null}`, `{"usage":null}`},
		{`{"id":"x"}`, `{"id":"x"}`},
	} {
		got := string(WithCost([]byte(c.body), 5_400_000))
		if got != c.want || !json.Valid([]byte(got)) {
			t.Errorf("WithCost(%s) = %s, want %s", c.body, got, c.want)
		}
	}
	// A rig's own cost is outvoted: the last member named cost is the gateway's.
	var v struct {
		Usage struct{ Cost json.Number } `json:"usage"`
	}
	_ = json.Unmarshal(WithCost([]byte(`{"usage":{"cost":9}}`), 5_400_000), &v)
	if v.Usage.Cost.String() != "0.000005400000" {
		t.Fatalf("a client reads cost %s", v.Usage.Cost)
	}
}
