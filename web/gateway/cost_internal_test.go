package gateway

import (
	"testing"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

func TestAnAnswerTellsWhatItCost(t *testing.T) {
	a := &attempt{cand: routing.Candidate{PriceInput: 150_000, PriceOutput: 300_000}}
	req := &gatewayRequest{ep: chatEndpoint, bounds: routing.Bounds{MaxInputTokens: 1000, MaxOutputTokens: 8}}
	// 20 input tokens at $0.15/M and 8 output (of 50 reported: the ticket bounds them) at $0.30/M.
	cost, ok := costOf(a, req, &admission.TokenCount{Input: 20, Output: 50})
	if want := money.Pico(20*150_000 + 8*300_000); !ok || cost != want {
		t.Fatalf("cost %s, want %s", cost, want)
	}
	// 16 of the 20 input tokens served from the prompt cache, at $0.0375/M; cached tokens past the input bound
	// are the bound's.
	a.cand.PriceCachedInput = 37_500
	cost, ok = costOf(a, req, &admission.TokenCount{Input: 20, Cached: 16, Output: 50})
	if want := money.Pico(4*150_000 + 16*37_500 + 8*300_000); !ok || cost != want {
		t.Fatalf("cost with cached tokens %s, want %s", cost, want)
	}
	clipped := &gatewayRequest{ep: chatEndpoint, bounds: routing.Bounds{MaxInputTokens: 10, MaxOutputTokens: 8}}
	if cost, _ := costOf(a, clipped, &admission.TokenCount{Input: 20, Cached: 16, Output: 8}); cost != 10*37_500+8*300_000 {
		t.Fatalf("cost with every bounded input token cached %s", cost)
	}
	if cost, ok := costOf(a, req, &admission.TokenCount{Input: 20}); !ok || cost != 0 {
		t.Fatalf("a generation with no output costs %s, want nothing", cost)
	}
	emb := &gatewayRequest{ep: embeddingEndpoint, bounds: routing.Bounds{MaxInputTokens: 1000}}
	if emb.ep.kind != ticket.KindEmbedding {
		t.Fatal("the embeddings endpoint is no embedding")
	}
	if cost, _ := costOf(a, emb, &admission.TokenCount{Input: 20}); cost != 20*150_000 {
		t.Fatalf("an embedding costs %s, want its input", cost)
	}
}
