package main

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
)

// testCarbonRouting: two home 4x RTX 4090 rigs of one model in the standard tier, claiming 1000 tokens/s each,
// one in Poland (662 gCO2e/kWh) asking less, one in Norway (30). Price routing takes Poland; a request that
// prefers carbon takes Norway. Each answer names its estimate per million tokens, 1800 W / 1000 tokens/s =
// 0.5 kWh per million x the grid x PUE 1.0, and a whole answer its own grams, its usage's tokens at that rate, in a
// header when it is small enough to read before relaying (a trailer otherwise).
func (b *gatewayBundle) testCarbonRouting(t *testing.T) {
	const model = "gw-carbon"
	poland := b.list(t, rigSpec{model: model, ask: 80_000, p99: 300, region: "pl"})
	norway := b.list(t, rigSpec{model: model, ask: 100_000, p99: 300, region: "no"})
	dev, _, secret := b.developer(t, "carbon", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	_, carbonKey := b.key(t, dev, accounts.NewKeyInput{Name: "prefers carbon", PreferCarbon: true})
	for _, tc := range []struct {
		name     string
		secret   string
		options  map[string]any
		want     string
		perMTok  string
		perToken float64
	}{
		{"by price without the preference", secret, nil, poland.ID, "331.000", 0.5 * 662 / 1e6},
		{"by price when asked for", secret, map[string]any{"prefer": "price"}, poland.ID, "331.000", 0.5 * 662 / 1e6},
		{"the low-carbon rig when carbon is preferred", secret, map[string]any{"prefer": "carbon"}, norway.ID, "15.000", 0.5 * 30 / 1e6},
		{"the low-carbon rig for a key that prefers carbon", carbonKey, nil, norway.ID, "15.000", 0.5 * 30 / 1e6},
		{"a request's own preference before its key's", carbonKey, map[string]any{"prefer": "price"}, poland.ID, "331.000", 0.5 * 662 / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []option.RequestOption
			if tc.options != nil {
				opts = append(opts, option.WithJSONSet("gpumarket", tc.options))
			}
			var res *http.Response
			chat, err := b.client(tc.secret).Chat.Completions.New(b.ctx, chatParams(model, 8), append(opts, option.WithResponseInto(&res))...)
			if err != nil {
				t.Fatal(err)
			}
			id, offering, _ := headersOf(t, res)
			if offering != tc.want {
				t.Fatalf("served by %s, want %s", offering, tc.want)
			}
			if got := res.Header.Get("X-GPUMarket-Gco2e-Per-Mtok"); got != tc.perMTok {
				t.Errorf("gCO2e per million tokens %q, want %s", got, tc.perMTok)
			}
			m := b.metered(t, id)
			tokens := chat.Usage.PromptTokens + chat.Usage.CompletionTokens
			if tokens == 0 || m.input+m.output != tokens {
				t.Fatalf("usage %d tokens, metered %d", tokens, m.input+m.output)
			}
			// A chat answer is small: its own grams come as a header, beside its length.
			got, err := strconv.ParseFloat(res.Header.Get("X-GPUMarket-Gco2e"), 64)
			if want := float64(tokens) * tc.perToken; err != nil || math.Abs(got-want) > 1e-6 {
				t.Errorf("the answer's gCO2e %q, want %.6f for %d tokens", res.Header.Get("X-GPUMarket-Gco2e"), want, tokens)
			}
			if res.ContentLength <= 0 {
				t.Errorf("the answer's length %d: a small answer keeps its Content-Length", res.ContentLength)
			}
		})
	}
	t.Run("an unknown preference: 400", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, b.p.URL()+"/v1/chat/completions",
			strings.NewReader(`{"model": "`+model+`", "messages": [{"role": "user", "content": "hi"}], "gpumarket": {"prefer": "speed"}}`))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", res.StatusCode)
		}
	})
}
