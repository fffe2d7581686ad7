package routing

import "testing"

func TestBoundsFor(t *testing.T) {
	one, big := int64(1), int64(1_000_000)
	cases := []struct {
		name      string
		model     string
		body      int
		maxTokens *int64
		choices   int64
		output    bool
		want      Bounds
	}{
		{"max_tokens 1", "meta-llama/Meta-Llama-3-8B-Instruct", 120, &one, 1, true, Bounds{632, 1}},
		{"no max_tokens: the model's window", "meta-llama/Meta-Llama-3-8B-Instruct", 120, nil, 1, true, Bounds{632, 8_192}},
		{"max_tokens above the window", "google/gemma-2-9b-it", 10, &big, 1, true, Bounds{522, 8_192}},
		{"n choices", "microsoft/phi-4", 0, &one, 4, true, Bounds{512, 4}},
		{"choices capped", "microsoft/phi-4", 0, &one, 1_000, true, Bounds{512, MaxChoices}},
		{"unknown model", "acme/secret-model", 1000, nil, 1, true, Bounds{1512, DefaultOutputLimit}},
		{"embedding", "acme/embedder", 2048, nil, 1, false, Bounds{2560, 0}},
	}
	for _, tc := range cases {
		if got := BoundsFor(tc.model, tc.body, tc.maxTokens, tc.choices, tc.output); got != tc.want {
			t.Errorf("%s: BoundsFor = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// What admission reserves output for: nothing for an embedding, its default without max tokens, else the route
// ticket's output bound, never past the model's window times the choices, and never overflowing.
func TestOutputBound(t *testing.T) {
	ptr := func(v int64) *int64 { return &v }
	const model = "meta-llama/Meta-Llama-3-8B-Instruct" // an 8,192-token window
	for _, c := range []struct {
		name      string
		model     string
		maxTokens *int64
		choices   int64
		output    bool
		want      *int64 // nil: admission's default
	}{
		{"an embedding makes none", model, ptr(100), 1, false, ptr(0)},
		{"an embedding without max tokens", model, nil, 1, false, ptr(0)},
		{"no max tokens: admission's default", model, nil, 3, true, nil},
		{"max tokens", model, ptr(100), 1, true, ptr(100)},
		{"times the choices", model, ptr(100), 4, true, ptr(400)},
		{"zero max tokens", model, ptr(0), 2, true, ptr(0)},
		{"capped at the model's window", model, ptr(1_000_000), 2, true, ptr(2 * 8_192)},
		{"an unknown model: the largest window", "some/model", ptr(1 << 40), 1, true, ptr(DefaultOutputLimit)},
		{"a huge ask cannot overflow", model, ptr(1 << 62), MaxChoices, true, ptr(MaxChoices * 8_192)},
	} {
		got := OutputBound(c.model, c.maxTokens, c.choices, c.output)
		switch {
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: OutputBound = %v; want %v", c.name, got, c.want)
		case got != nil && *got != *c.want:
			t.Errorf("%s: OutputBound = %d; want %d", c.name, *got, *c.want)
		}
	}
}
