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
