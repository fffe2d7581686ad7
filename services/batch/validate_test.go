package batch

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
)

func TestCheckLines(t *testing.T) {
	price := catalog.Price{Tier: catalog.TierBatch, Input: 80_000, Output: 160_000}
	// "big" has a batch price of its own; "m" is at the tier's default; "unpriced" is offered with no price.
	book := catalog.PriceBook{catalog.TierBatch: {price, {Tier: catalog.TierBatch, Model: "big", Input: 900_000, Output: 1_800_000}}}
	priceOf := func(m string) (catalog.Price, bool) {
		if m == "unpriced" {
			return catalog.Price{}, false
		}
		return book.At(catalog.TierBatch, m, time.Now())
	}
	offered := func(m string) bool { return m == "m" || m == "big" || m == "unpriced" }
	chat := func(id, url, model, extra string) string {
		return `{"custom_id":"` + id + `","method":"POST","url":"` + url + `","body":{"model":"` + model + `"` + extra + `}}`
	}
	t.Run("the estimate is the gateway's bound on each line, at the batch price", func(t *testing.T) {
		l1 := chat("a", "/v1/chat/completions", "m", `,"max_tokens":10`)
		l2 := chat("b", "/v1/chat/completions", "m:standard", `,"max_completion_tokens":20,"n":2`)
		c, err := checkLines(strings.NewReader(l1+"\n\n"+l2+"\n"), "/v1/chat/completions", offered, priceOf)
		if err != nil || len(c.errors) != 0 {
			t.Fatal(err, c.errors)
		}
		body1 := len(`{"model":"m","max_tokens":10}`)
		body2 := len(`{"model":"m:standard","max_completion_tokens":20,"n":2}`)
		in := int64(body1+routing.InputAllowance) + int64(body2+routing.InputAllowance)
		out := int64(10 + 2*20)
		want := money.Pico(in*80_000 + out*160_000)
		if c.estimate != want || len(c.lines) != 2 || c.lines[1].line != 3 || c.lines[1].offset != int64(len(l1)+2) ||
			c.lines[1].length != len(l2) {
			t.Fatalf("estimate %s, want %s; lines %+v", c.estimate, want, c.lines)
		}
	})
	t.Run("a line is estimated at its model's own batch price", func(t *testing.T) {
		c, err := checkLines(strings.NewReader(chat("a", "/v1/chat/completions", "big", `,"max_tokens":10`)), "/v1/chat/completions", offered, priceOf)
		if err != nil || len(c.errors) != 0 {
			t.Fatal(err, c.errors)
		}
		in := int64(len(`{"model":"big","max_tokens":10}`) + routing.InputAllowance)
		if want := money.Pico(in*900_000 + 10*1_800_000); c.estimate != want {
			t.Fatalf("estimate %s, want %s at the model's own price", c.estimate, want)
		}
		c, _ = checkLines(strings.NewReader(chat("a", "/v1/chat/completions", "unpriced", "")), "/v1/chat/completions", offered, priceOf)
		if len(c.errors) != 1 || c.errors[0].Code != "model_not_found" {
			t.Fatalf("a model without a batch price: %+v", c.errors)
		}
	})
	t.Run("a line without max_tokens is bounded by its model's output limit", func(t *testing.T) {
		c, _ := checkLines(strings.NewReader(chat("a", "/v1/completions", "m", "")), "/v1/completions", offered, priceOf)
		body := int64(len(`{"model":"m"}`))
		if want := money.Pico((body+routing.InputAllowance)*80_000 + routing.DefaultOutputLimit*160_000); c.estimate != want {
			t.Fatalf("estimate %s, want %s", c.estimate, want)
		}
	})
	t.Run("an embedding has no output", func(t *testing.T) {
		c, _ := checkLines(strings.NewReader(chat("a", "/v1/embeddings", "m", `,"input":"hi"`)), "/v1/embeddings", offered, priceOf)
		if want := money.Pico(int64(len(`{"model":"m","input":"hi"}`)+routing.InputAllowance) * 80_000); c.estimate != want {
			t.Fatalf("estimate %s, want %s", c.estimate, want)
		}
	})
	for _, tc := range []struct{ name, line, code string }{
		{"bad JSON", `{"custom_id":`, "invalid_json_line"},
		{"no custom_id", chat("", "/v1/chat/completions", "m", ""), "missing_required_parameter"},
		{"method", strings.Replace(chat("a", "/v1/chat/completions", "m", ""), "POST", "GET", 1), "invalid_method"},
		{"url", chat("a", "/v1/moderations", "m", ""), "invalid_url"},
		{"endpoint", chat("a", "/v1/embeddings", "m", ""), "mismatched_endpoint"},
		{"model", chat("a", "/v1/chat/completions", "other", ""), "model_not_found"},
		{"n", chat("a", "/v1/chat/completions", "m", `,"n":0`), "invalid_body"},
		{"too long", chat("a", "/v1/chat/completions", "m", `,"x":"`+strings.Repeat("y", maxLineBytes)+`"`), "line_too_long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := checkLines(strings.NewReader(chat("ok", "/v1/chat/completions", "m", "")+"\n"+tc.line+"\n"), "/v1/chat/completions", offered, priceOf)
			if err != nil || len(c.errors) != 1 || c.errors[0].Code != tc.code || c.errors[0].Line == nil || *c.errors[0].Line != 2 {
				t.Fatalf("errors %+v (%v), want %s on line 2", c.errors, err, tc.code)
			}
		})
	}
	t.Run("duplicate custom_id", func(t *testing.T) {
		l := chat("same", "/v1/chat/completions", "m", "")
		c, _ := checkLines(strings.NewReader(l+"\n"+l), "/v1/chat/completions", offered, priceOf)
		if len(c.errors) != 1 || c.errors[0].Code != "duplicate_custom_id" || *c.errors[0].Line != 2 {
			t.Fatalf("errors %+v", c.errors)
		}
	})
}
