package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFlagsChooseAProfile(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"-model", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "-gpu", "rtx-4090", "-count", "4",
		"-speed", "10", "-fail-rate", "0.25", "-addr", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Options.Profile
	if p.GPU != "rtx-4090" || p.Count != 4 || len(p.Levels) != 5 || cfg.Options.Speed != 10 ||
		cfg.Options.FailRate != 0.25 || cfg.Addr != "127.0.0.1:0" {
		t.Errorf("config %+v", cfg)
	}

	cfg, err = parseFlags([]string{"-zero", "-model", "anything"}, io.Discard)
	if err != nil || !cfg.Options.Profile.IsZero() || cfg.Options.Model != "anything" || cfg.Addr != "127.0.0.1:8000" {
		t.Errorf("zero: %+v, %v", cfg, err)
	}

	_, err = parseFlags([]string{"-gpu", "rtx-4090", "-count", "3"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-gpu rtx-4090 -count 8") {
		t.Errorf("unknown rig: %v", err)
	}
	for _, args := range [][]string{{"-speed", "0"}, {"-fail-rate", "2"}, {"-zero", "-model", ""}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestMainServesUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"-zero", "-model", "sim", "-addr", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	base := "http://" + m.Addr()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Model string `json:"model"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || out.Model != "sim" || out.Usage.CompletionTokens != 3 {
		t.Fatalf("chat: %d %+v %v", resp.StatusCode, out, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := http.Get(base + "/v1/models"); err == nil {
		t.Error("still serving after shutdown")
	}
}

// The second request of a conversation repeats the first one's messages, which the server
// served a moment ago: it reports their tokens cached, in whole blocks of 16 and never the
// last token, as vLLM does; the first request, and a conversation never seen, report none.
// Streamed, the usage chunk reports the same.
func TestSecondRequestOfAConversationReportsCachedTokens(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"-zero", "-model", "sim", "-addr", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = m.Run(ctx) }()
	base := "http://" + m.Addr()

	type usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	ask := func(body string) usage {
		t.Helper()
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var last usage
			for _, line := range strings.Split(string(raw), "\n") {
				payload, ok := strings.CutPrefix(line, "data: ")
				if !ok || !strings.Contains(payload, `"usage":{`) {
					continue
				}
				var c struct{ Usage usage }
				if err := json.Unmarshal([]byte(payload), &c); err != nil {
					t.Fatal(err)
				}
				last = c.Usage
			}
			return last
		}
		var a struct{ Usage usage }
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		return a.Usage
	}
	system := `{"role":"system","content":"` + strings.Repeat("You answer questions about GPU rentals briefly and exactly. ", 8) + `"}`
	first := `{"role":"user","content":"What does an hour of an RTX 4090 cost?"}`
	one := ask(`{"model":"sim","max_tokens":4,"messages":[` + system + `,` + first + `]}`)
	if one.PromptTokensDetails.CachedTokens != 0 || one.PromptTokens < 64 {
		t.Fatalf("first request: %+v, want a prompt of 64 tokens or more and none cached", one)
	}
	second := `{"model":"sim","max_tokens":4,"messages":[` + system + `,` + first +
		`,{"role":"assistant","content":"About forty cents."},{"role":"user","content":"And an H100?"}]}`
	two := ask(second)
	want := one.PromptTokens / 16 * 16
	if two.PromptTokensDetails.CachedTokens != want || two.PromptTokens <= one.PromptTokens {
		t.Fatalf("second request: %+v, want the first's %d prompt tokens cached to the block: %d", two, one.PromptTokens, want)
	}
	streamed := ask(strings.Replace(second, `"max_tokens":4`, `"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}`, 1))
	if streamed.PromptTokens != two.PromptTokens || streamed.PromptTokensDetails.CachedTokens != two.PromptTokens-1-(two.PromptTokens-1)%16 {
		t.Fatalf("the same prompt again, streamed: %+v, want all of its %d tokens but the last cached, to the block", streamed, two.PromptTokens)
	}
	other := ask(`{"model":"sim","max_tokens":4,"messages":[{"role":"user","content":"` + strings.Repeat("A different conversation. ", 10) + `"}]}`)
	if other.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("a conversation never seen: %+v, want none cached", other)
	}
}

// -native serves the Anthropic Messages API and OpenAI's Responses API beside chat completions;
// without it they are 404, as on an engine that serves only OpenAI's chat and completions.
func TestNativeFlagServesMessagesAndResponses(t *testing.T) {
	t.Parallel()
	for _, native := range []bool{false, true} {
		args := []string{"-zero", "-model", "sim", "-addr", "127.0.0.1:0"}
		if native {
			args = append(args, "-native")
		}
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Options.Native != native {
			t.Fatalf("%q: Native %v", args, cfg.Options.Native)
		}
		m, err := Listen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = m.Run(ctx) }()
		base := "http://" + m.Addr()
		for _, c := range []struct{ path, body, kind string }{
			{"/v1/messages", `{"model":"sim","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, "message"},
			{"/v1/responses", `{"model":"sim","max_output_tokens":3,"input":"hi"}`, "response"},
		} {
			path := c.path
			resp, err := http.Post(base+path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Type   string `json:"type"`
				Object string `json:"object"`
				Model  string `json:"model"`
				Usage  struct {
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			switch {
			case !native && resp.StatusCode != http.StatusNotFound:
				t.Errorf("without -native, %s: status %d", path, resp.StatusCode)
			case native && (err != nil || resp.StatusCode != http.StatusOK || out.Type+out.Object != c.kind || out.Model != "sim" ||
				out.Usage.OutputTokens != 3):
				t.Errorf("with -native, %s: %d %+v %v", path, resp.StatusCode, out, err)
			}
		}
		cancel()
		m.Close()
	}
}
