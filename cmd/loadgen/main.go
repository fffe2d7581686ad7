// Command loadgen measures an OpenAI-compatible endpoint by the public benchmark's method
// (package load): N requests arriving as a Poisson process at a rate, their time to first token,
// time per output token and latency percentiles, throughput, and the cost per million tokens at
// an hourly price. A provider runs it against a rig before listing it, and against the listing
// through the platform's gateway, as a customer reaches it, to attach the result to the listing
// (docs/provider-benchmarks.md); the gateway benchmark runs it against the gateway.
//
//	loadgen -url https://gpumarket.example/v1 -offering <id> -api-key K (or $GPUMARKET_API_KEY) ...
//
// pins every request to the offering, checks that each answer came from it, and prices the
// tokens at what the platform's catalog publishes for it as well as at -usd-per-hour.
//
//	loadgen -url http://127.0.0.1:8000/v1 [-model M] [-offering ID] [-rate 8] [-n 200] [-concurrency 0]
//	        [-max-tokens 200] [-prompt-tokens 200 | -prompts FILE] [-stream=true]
//	        [-endpoint chat|completions] [-usd-per-hour 2.0] [-header K=V ...] [-api-key K]
//	        [-timeout 10m] [-seed 1] [-json FILE] [-format table|json] [-quiet]
//
// A progress bar goes to stderr when it is a terminal; the result goes to stdout as a table, or
// as JSON with -format json, and to a JSON file with -json. It exits 1 when no request succeeded.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gpumarket/gpumarket/cmd/loadgen/load"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, isTerminal(os.Stderr))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

// run is the command: flags, the run, its report. drawProgress says whether stderr is a
// terminal to draw on.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, drawProgress bool) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var bar *progressBar
	if drawProgress && !c.quiet {
		bar = &progressBar{w: stderr}
		c.opts.OnProgress = bar.draw
	}
	res, runErr := load.Run(ctx, c.opts)
	bar.finish()
	if runErr != nil && res.Requests == 0 {
		return runErr // nothing was measured
	}
	out, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	out = append(out, '\n')
	if c.jsonFile != "" {
		if err := os.WriteFile(c.jsonFile, out, 0o644); err != nil {
			return err
		}
	}
	if c.format == "json" {
		_, err = stdout.Write(out)
	} else {
		err = res.WriteTable(stdout)
	}
	switch {
	case err != nil:
		return err
	case runErr != nil:
		return fmt.Errorf("stopped after %d of %d requests: %w", res.Sent, res.Requests, runErr)
	case res.Completed == 0:
		return fmt.Errorf("no request succeeded (%d failed)", res.Failed)
	}
	return nil
}

// readPrompts reads a file of prompts, one a line; empty lines are skipped.
func readPrompts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var prompts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			prompts = append(prompts, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("-prompts %s: %w", path, err)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("-prompts %s: no prompt in the file", path)
	}
	return prompts, nil
}

// headerFlag collects repeated -header K=V flags.
type headerFlag struct{ h http.Header }

func (f headerFlag) String() string { return "" }

func (f headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q is not K=V", s)
	}
	f.h.Add(k, strings.TrimSpace(v))
	return nil
}
