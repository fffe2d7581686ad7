package main

// loadgen's configuration: its flags, and the API key from the environment when -api-key is not given. This file
// is the only one of the binary that reads the environment; README.md's table for loadgen lists every variable
// read here, and TestReadmeConfigurationTables keeps it so.

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
)

// config is what the flags chose, with the API key from the environment when no flag gives one.
type config struct {
	opts     load.Options
	jsonFile string
	format   string
	quiet    bool
}

// parseFlags reads the flags, and OPENAI_API_KEY, else GPUMARKET_API_KEY, when -api-key is not given.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	o := &c.opts
	header := headerFlag{http.Header{}}
	var endpoint, promptsFile string
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8000/v1", "the API's base URL (a rig, an agent or the gateway)")
	fs.StringVar(&o.APIKey, "api-key", "", "bearer token (default $OPENAI_API_KEY, else $GPUMARKET_API_KEY)")
	fs.StringVar(&o.Model, "model", "", "model to request (default: the offering's, else the first GET <url>/models lists)")
	fs.StringVar(&o.Offering, "offering", "", "pin every request to this offering of the platform's gateway, and check that it served each")
	fs.Float64Var(&o.Rate, "rate", 0, "Poisson arrivals per second; 0 or inf sends all at once")
	fs.IntVar(&o.Requests, "n", 200, "requests to send (the benchmark sent 200 per run)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "most requests in flight at once; 0 for no cap")
	fs.IntVar(&o.MaxTokens, "max-tokens", 200, "max_tokens of each request; 0 leaves it to the endpoint")
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 200, "approximate length of each synthetic prompt in tokens")
	fs.StringVar(&promptsFile, "prompts", "", "file of prompts, one a line, sent in turn instead of synthetic ones")
	fs.BoolVar(&o.Stream, "stream", true, "stream the answers, measuring TTFT and TPOT; false measures latency only")
	fs.StringVar(&endpoint, "endpoint", "chat", "chat (/chat/completions) or completions (/completions)")
	fs.Float64Var(&o.USDPerHour, "usd-per-hour", 0, "hourly price of what serves the endpoint, for the cost per million tokens")
	fs.Var(header, "header", "`K=V` header added to every request, e.g. X-GPUMarket-Tier=batch (repeatable)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "bound on each request; 0 for none")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the arrival schedule and the synthetic prompts")
	fs.StringVar(&c.jsonFile, "json", "", "write the result as JSON to this file")
	fs.StringVar(&c.format, "format", "table", "what goes to stdout: table or json")
	fs.BoolVar(&c.quiet, "quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.format != "table" && c.format != "json" {
		return c, fmt.Errorf("-format %q: want table or json", c.format)
	}
	if o.APIKey == "" {
		o.APIKey = cmp.Or(os.Getenv("OPENAI_API_KEY"), os.Getenv("GPUMARKET_API_KEY"))
	}
	o.Endpoint = load.Endpoint(endpoint)
	if len(header.h) > 0 {
		o.Header = header.h
	}
	if promptsFile != "" {
		prompts, err := readPrompts(promptsFile)
		if err != nil {
			return c, err
		}
		o.Prompts = prompts
	}
	return c, o.Validate()
}
