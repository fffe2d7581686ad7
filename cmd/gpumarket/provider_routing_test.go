package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
)

// providerAccount signs up a provider whose display name the catalog shows.
func (b *gatewayBundle) providerAccount(t *testing.T, email, name string) string {
	t.Helper()
	u, err := b.p.accounts.SignUp(b.ctx, accounts.SignUpInput{Email: email, Password: demo.Password, Role: accounts.RoleProvider,
		AccountName: name})
	if err != nil {
		t.Fatal(err)
	}
	return u.AccountID
}

// listAs is list for another provider's rig, with its claimed P50 time to first token and throughput.
func (b *gatewayBundle) listAs(t *testing.T, providerID string, spec rigSpec, p50, tps float64) catalog.Offering {
	t.Helper()
	o, err := b.p.catalog.Create(b.ctx, providerID, catalog.ListingInput{GPU: spec.gpu, GPUCount: spec.count, Region: spec.region,
		Model: spec.model, AskInput: 2 * spec.ask / 3, AskOutput: 2*spec.ask - 2*spec.ask/3, ClaimedTTFTP50Ms: &p50,
		ClaimedTTFTP99Ms: &spec.p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	b.qualify(t, o)
	profile := simulation.Zero()
	profile.Model = spec.model
	rig, err := b.p.startRig(b.ctx, o.ID, providerID, spec.gpu, spec.count, profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.stop)
	if err := b.p.router.Refresh(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.eventually(t, "the rig's heartbeat reaches routing", func() bool {
		_, err := b.p.router.Pick(routing.Request{Model: spec.model, Tier: o.Tier, Offering: o.ID})
		return err == nil
	})
	return o
}

// chatAnswer is what a raw call to /v1/chat/completions got: its status, the offering that served it and the
// error it answered, in OpenAI's shape.
type chatAnswer struct {
	status   int
	offering string
	err      struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
}

// chat posts a chat completion with the body's members beside the model and a user message, and the headers.
func (b *gatewayBundle) chat(t *testing.T, secret, model string, members map[string]any, header map[string]string) chatAnswer {
	t.Helper()
	body := map[string]any{"model": model, "max_tokens": 4, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	for k, v := range members {
		body[k] = v
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.p.URL()+"/v1/chat/completions", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	a := chatAnswer{status: res.StatusCode}
	if res.StatusCode == http.StatusOK {
		_, a.offering, _ = headersOf(t, res)
		return a
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(out, &e) != nil || json.Unmarshal(e.Error, &a.err) != nil || a.err.Message == "" {
		t.Fatalf("status %d with a body not in OpenAI's error shape: %s", res.StatusCode, out)
	}
	return a
}

// testProviderPreferences: OpenRouter's provider object, and gpumarket's own preferences beside the old fields of
// its gpumarket object, each decide which of three rigs of two providers serves, as the X-GPUMarket-Offering
// header shows; what cannot be served is refused beside the field that made it so.
func (b *gatewayBundle) testProviderPreferences(t *testing.T) {
	const model = "gw-provider"
	acme := b.providerAccount(t, "acme@provider.example.com", "Acme Compute")
	lisboa := b.providerAccount(t, "lisboa@provider.example.com", "Lisboa Rigs")
	// Asks more than 5% apart: routing's own order is by ask with no draw. Acme's 4x RTX 4090 in Poland asks least;
	// Lisboa's one H100 in Norway is next, its 2x RTX 4090 in France the dearest, claimed the fastest.
	a1 := b.listAs(t, acme, rigSpec{model: model, gpu: "rtx-4090", count: 4, region: "pl", ask: 80_000, p99: 300}, 150, 1000)
	l1 := b.listAs(t, lisboa, rigSpec{model: model, gpu: "h100-sxm", count: 1, region: "no", ask: 100_000, p99: 300}, 150, 1000)
	l2 := b.listAs(t, lisboa, rigSpec{model: model, gpu: "rtx-4090", count: 2, region: "fr", ask: 120_000, p99: 300}, 40, 3000)
	_, _, secret := b.developer(t, "preferences", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	std := b.prices[catalog.TierStandard]

	for _, tc := range []struct {
		name    string
		members map[string]any
		want    string
	}{
		{"nothing said: the cheapest", nil, a1.ID},
		{"only a provider, by its display name", map[string]any{"provider": map[string]any{"only": []string{"Lisboa Rigs"}}}, l1.ID},
		{"only an offering, by id", map[string]any{"provider": map[string]any{"only": []string{l2.ID}}}, l2.ID},
		{"ignore a provider, case aside", map[string]any{"provider": map[string]any{"ignore": []string{"acme compute"}}}, l1.ID},
		{"ignore an offering", map[string]any{"provider": map[string]any{"ignore": []string{a1.ID, l1.ID}}}, l2.ID},
		{"order a provider first", map[string]any{"provider": map[string]any{"order": []string{"lisboa-rigs"}}}, l1.ID},
		{"order an offering first, without fallbacks", map[string]any{"provider": map[string]any{"order": []string{l2.ID, "Acme Compute"},
			"allow_fallbacks": false}}, l2.ID},
		{"sort by throughput", map[string]any{"provider": map[string]any{"sort": "throughput"}}, l2.ID},
		{"sort by latency, as OpenRouter's object", map[string]any{"provider": map[string]any{"sort": map[string]any{"by": "latency", "partition": "none"}}}, l2.ID},
		{"sort by price", map[string]any{"provider": map[string]any{"sort": "price"}}, a1.ID},
		{"max price at the tier's price", map[string]any{"provider": map[string]any{"max_price": map[string]any{
			"prompt": std.Input.Decimal(), "completion": json.Number(std.Output.Decimal())}}}, a1.ID},
		{"require parameters a chat with the usual ones", map[string]any{"temperature": 0.2, "provider": map[string]any{"require_parameters": true}}, a1.ID},
		{"quantizations that include unknown", map[string]any{"provider": map[string]any{"quantizations": []string{"fp8", "unknown"}}}, a1.ID},
		{"enterprise hardware", map[string]any{"gpumarket": map[string]any{"hardware_class": "enterprise"}}, l1.ID},
		{"consumer hardware, and Lisboa only", map[string]any{"gpumarket": map[string]any{"hardware_class": "consumer"},
			"provider": map[string]any{"only": []string{"Lisboa Rigs"}}}, l2.ID},
		{"a region", map[string]any{"gpumarket": map[string]any{"region": "fr"}}, l2.ID},
		{"a carbon cap Poland's grid breaks", map[string]any{"gpumarket": map[string]any{"max_gco2e_per_mtok": 100}}, l1.ID},
		{"gpumarket's own fields still work: a pin", map[string]any{"gpumarket": map[string]any{"offering": l2.ID},
			"provider": map[string]any{"sort": "price"}}, l2.ID},
		{"gpumarket's own fields still work: the ask cap", map[string]any{"gpumarket": map[string]any{"max_price_per_mtok": "0.1"},
			"provider": map[string]any{"order": []string{l2.ID}}}, a1.ID},
		{"gpumarket's own fields still work: carbon first", map[string]any{"gpumarket": map[string]any{"prefer": "carbon"}}, l2.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := b.chat(t, secret, model, tc.members, nil); a.status != http.StatusOK || a.offering != tc.want {
				t.Fatalf("status %d, served by %q (%s); want %s", a.status, a.offering, a.err.Message, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name    string
		members map[string]any
		status  int
		code    string
		param   string
	}{
		{"only and ignore name the same provider", map[string]any{"provider": map[string]any{"only": []string{"Acme Compute"},
			"ignore": []string{"acme-compute"}}}, 400, "invalid_provider_preferences", "provider.ignore"},
		{"ignore drops, by id, the one offering only keeps by name", map[string]any{"provider": map[string]any{"only": []string{"Acme Compute"},
			"ignore": []string{a1.ID}}}, 400, "invalid_provider_preferences", "provider.ignore"},
		{"no fallbacks and an order naming an unknown provider", map[string]any{"provider": map[string]any{"order": []string{"Nobody"},
			"allow_fallbacks": false}}, 404, "provider_not_found", "provider.order"},
		{"only providers that do not serve the model", map[string]any{"provider": map[string]any{"only": []string{"Nobody"}}},
			404, "provider_not_found", "provider.only"},
		{"nothing left: everyone ignored", map[string]any{"provider": map[string]any{"ignore": []string{"Acme Compute", "Lisboa Rigs"}}},
			503, "no_offering_meets_preferences", "provider.ignore"},
		{"nothing left: the price a request pays is over max_price", map[string]any{"provider": map[string]any{"max_price": map[string]any{
			"prompt": 0.01}}}, 503, "no_offering_meets_preferences", "provider.max_price.prompt"},
		{"nothing left: no enterprise rig in France", map[string]any{"gpumarket": map[string]any{"region": []string{"fr"},
			"hardware_class": "enterprise"}}, 503, "no_offering_meets_preferences", "gpumarket.region"},
		{"nothing left: a carbon cap no rig meets", map[string]any{"gpumarket": map[string]any{"max_gco2e_per_mtok": 0.5}},
			503, "no_offering_meets_preferences", "gpumarket.max_gco2e_per_mtok"},
		{"require_parameters with tools", map[string]any{"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "f"}}},
			"provider": map[string]any{"require_parameters": true}}, 400, "unsupported_parameter", "provider.require_parameters"},
		{"a quantization the catalog does not record", map[string]any{"provider": map[string]any{"quantizations": []string{"fp8"}}},
			400, "unsupported_provider_preference", "provider.quantizations"},
		{"a sort that is none", map[string]any{"provider": map[string]any{"sort": "cheapest"}}, 400, "invalid_provider_preferences", "provider.sort"},
		{"sort and prefer both", map[string]any{"provider": map[string]any{"sort": "latency"}, "gpumarket": map[string]any{"prefer": "carbon"}},
			400, "invalid_provider_preferences", "provider.sort"},
		{"zero data retention", map[string]any{"provider": map[string]any{"zdr": true}}, 400, "unsupported_provider_preference", "provider.zdr"},
		{"an unknown region", map[string]any{"gpumarket": map[string]any{"region": "mars"}}, 400, "invalid_provider_preferences", "gpumarket.region"},
		{"a field OpenRouter does not have", map[string]any{"provider": map[string]any{"fastest": true}}, 400, "invalid_provider_preferences", "provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.chat(t, secret, model, tc.members, nil)
			if a.status != tc.status || a.err.Code == nil || *a.err.Code != tc.code || a.err.Param == nil || *a.err.Param != tc.param {
				t.Fatalf("status %d, error %+v; want %d %s beside %s", a.status, a.err, tc.status, tc.code, tc.param)
			}
		})
	}

	t.Run("without fallbacks the first choice alone is tried", func(t *testing.T) {
		const model = "gw-provider-fallbacks"
		b.list(t, rigSpec{model: model, ask: 50_000, p99: 300, failRate: 1})
		healthy := b.list(t, rigSpec{model: model, ask: 150_000, p99: 300})
		a := b.chat(t, secret, model, map[string]any{"provider": map[string]any{"allow_fallbacks": false}}, nil)
		if a.status != http.StatusServiceUnavailable || a.err.Code == nil || *a.err.Code != "no_capacity" {
			t.Fatalf("status %d, error %+v; want 503 no_capacity once the one candidate failed", a.status, a.err)
		}
		if a := b.chat(t, secret, model, nil, nil); a.status != http.StatusOK || a.offering != healthy.ID {
			t.Fatalf("with fallbacks: status %d, served by %q; want %s", a.status, a.offering, healthy.ID)
		}
	})
}

// testConversations: the requests of one conversation, named by session_id, X-Session-Id, prompt_cache_key or
// their opening messages, stay on the rig that served the first, though it is not the cheapest, until it can no
// longer serve them; then they move, and stay on the new one.
func (b *gatewayBundle) testConversations(t *testing.T) {
	const model = "gw-sticky"
	cheap := b.list(t, rigSpec{model: model, ask: 80_000, p99: 300})
	dear := b.list(t, rigSpec{model: model, ask: 120_000, p99: 300})
	_, _, secret := b.developer(t, "conversations", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	served := func(t *testing.T, members map[string]any, header map[string]string) string {
		t.Helper()
		a := b.chat(t, secret, model, members, header)
		if a.status != http.StatusOK {
			t.Fatalf("status %d: %s", a.status, a.err.Message)
		}
		return a.offering
	}
	pinned := map[string]any{"offering": dear.ID}
	opening := []map[string]string{{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a GPU."}}
	for _, tc := range []struct {
		name   string
		first  map[string]any // with the pin to the dear rig
		next   map[string]any
		header map[string]string
	}{
		{"session_id", map[string]any{"session_id": "s-1"}, map[string]any{"session_id": "s-1"}, nil},
		{"X-Session-Id", nil, nil, map[string]string{"X-Session-Id": "h-1"}},
		{"prompt_cache_key", map[string]any{"prompt_cache_key": "k-1"}, map[string]any{"prompt_cache_key": "k-1"}, nil},
		{"the opening messages", map[string]any{"messages": opening}, map[string]any{"messages": append(opening,
			map[string]string{"role": "assistant", "content": "H100."}, map[string]string{"role": "user", "content": "Another?"})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := map[string]any{"gpumarket": pinned}
			for k, v := range tc.first {
				first[k] = v
			}
			if got := served(t, first, tc.header); got != dear.ID {
				t.Fatalf("the pinned first request served by %s", got)
			}
			for range 3 {
				if got := served(t, tc.next, tc.header); got != dear.ID {
					t.Fatalf("the conversation's next request served by %s, want %s, which served it first", got, dear.ID)
				}
			}
			if got := served(t, nil, nil); got != cheap.ID {
				t.Fatalf("another conversation's first request served by %s, want the cheapest %s", got, cheap.ID)
			}
		})
	}
	t.Run("another account's conversation of the same name is its own", func(t *testing.T) {
		_, _, other := b.developer(t, "conversations-other", 20*money.PicoPerUSD, accounts.NewKeyInput{})
		if a := b.chat(t, other, model, map[string]any{"session_id": "s-1"}, nil); a.status != http.StatusOK || a.offering != cheap.ID {
			t.Fatalf("status %d, served by %q; want %s", a.status, a.offering, cheap.ID)
		}
	})
	t.Run("it moves once its rig is no longer eligible, and stays on the new one", func(t *testing.T) {
		conv := map[string]any{"session_id": "s-move"}
		if got := served(t, map[string]any{"session_id": "s-move", "gpumarket": pinned}, nil); got != dear.ID {
			t.Fatalf("the pinned first request served by %s", got)
		}
		// The dear rig is over this request's cap on the ask: it is no candidate, and the cheap one serves.
		if got := served(t, map[string]any{"session_id": "s-move", "gpumarket": map[string]any{"max_price_per_mtok": "0.1"}}, nil); got != cheap.ID {
			t.Fatalf("under a cap the dear rig breaks, served by %s", got)
		}
		for range 3 {
			if got := served(t, conv, nil); got != cheap.ID {
				t.Fatalf("after the move, served by %s, want %s", got, cheap.ID)
			}
		}
	})
}
