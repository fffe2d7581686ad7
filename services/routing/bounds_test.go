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
