package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
	"github.com/gpumarket/gpumarket/services/simulation"
)

func TestFlagsMakeTheOptions(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "from-env")
	prompts := filepath.Join(t.TempDir(), "prompts.txt")
	if err := os.WriteFile(prompts, []byte("first prompt\n\nsecond prompt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseFlags([]string{"-url", "http://gw:8080/v1", "-rate", "inf", "-n", "50", "-stream=false",
		"-header", "X-GPUMarket-Tier=batch", "-header", "X-Trace = 1", "-prompts", prompts,
		"-endpoint", "completions", "-usd-per-hour", "0.25", "-format", "json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if o.APIKey != "from-env" || o.Requests != 50 || o.Stream || o.Endpoint != load.EndpointCompletions ||
		o.USDPerHour != 0.25 || o.Header.Get("X-GPUMarket-Tier") != "batch" || o.Header.Get("X-Trace") != "1" ||
		len(o.Prompts) != 2 || o.Prompts[1] != "second prompt" || c.format != "json" || !math.IsInf(o.Rate, 1) {
		t.Errorf("options %+v", c)
	}
	for _, args := range [][]string{{"-header", "novalue"}, {"-format", "csv"}, {"-n", "0"}, {"-endpoint", "x"},
		{"-prompts", filepath.Join(t.TempDir(), "missing")}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestRunPrintsATableAndWritesJSON(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "sim"}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "result.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL + "/v1", "-n", "30", "-rate", "300", "-max-tokens", "4",
		"-usd-per-hour", "2", "-json", file}, &stdout, &stderr, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"30 ok, 0 failed", "TTFT", "per M total tokens", "model sim"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "30/30 done") {
		t.Errorf("progress bar %q", stderr.String())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var res load.Result
	if err := json.Unmarshal(b, &res); err != nil || res.Completed != 30 || res.OutputTokens != 120 {
		t.Errorf("JSON file: %v %+v", err, res)
	}

	stdout.Reset()
	stderr.Reset()
	if err := run(context.Background(), []string{"-url", srv.URL + "/v1", "-n", "3", "-format", "json", "-quiet"},
		&stdout, &stderr, true); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Completed != 3 || stderr.Len() != 0 {
		t.Errorf("-format json -quiet: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

func TestRunFailsWhenNothingSucceeds(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(simulation.NewHandler(simulation.Options{Profile: simulation.Zero(), Model: "sim", FailRate: 1}))
	defer srv.Close()
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL + "/v1", "-model", "sim", "-n", "5"}, &stdout, io.Discard, false)
	if err == nil || !strings.Contains(err.Error(), "no request succeeded") || !strings.Contains(stdout.String(), "500") {
		t.Errorf("err %v, table:\n%s", err, stdout.String())
	}
}

func TestOfferingFlagAndThePlatformsKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("GPUMARKET_API_KEY", "gm-key")
	c, err := parseFlags([]string{"-url", "https://gpumarket.example/v1", "-offering", "3f0c9e1a-0000-4000-8000-000000000001"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.APIKey != "gm-key" || c.opts.Offering != "3f0c9e1a-0000-4000-8000-000000000001" {
		t.Errorf("options %+v", c.opts)
	}
	if _, err := parseFlags([]string{"-offering", "a b"}, io.Discard); err == nil {
		t.Error("an offering id with a space accepted")
	}
}
