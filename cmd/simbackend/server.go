package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/simulation"
)

// Config is what the flags chose.
type Config struct {
	Addr    string
	List    bool // print the profiles and exit
	Options simulation.Options
}

// parseFlags reads the command line; an unknown configuration is refused with the ones that
// exist for the model.
func parseFlags(args []string, out io.Writer) (Config, error) {
	fs := flag.NewFlagSet("simbackend", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg Config
	var model, gpu string
	var count int
	var zero bool
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8000", "listen address")
	fs.StringVar(&model, "model", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "model to serve, as the benchmark names it")
	fs.StringVar(&gpu, "gpu", "h100-pcie", "GPU SKU of the profile: h100-pcie or rtx-4090")
	fs.IntVar(&count, "count", 1, "GPUs in the profile's rig")
	fs.BoolVar(&zero, "zero", false, "no latency at all: serve -model, any name, without a profile (-gpu and -count unused)")
	fs.Float64Var(&cfg.Options.Speed, "speed", 1, "time scale: 10 runs ten times faster")
	fs.Float64Var(&cfg.Options.FailRate, "fail-rate", 0, "fraction of requests answered 500 before any byte")
	fs.Uint64Var(&cfg.Options.Seed, "seed", 1, "seed of latencies, failures, text and embeddings")
	fs.BoolVar(&cfg.Options.PrefixCache, "prefix-cache", true,
		"report prompt tokens a simulated prefix cache served, in usage.prompt_tokens_details.cached_tokens")
	fs.BoolVar(&cfg.Options.Native, "native", false,
		"also serve the Anthropic Messages API (/v1/messages) and OpenAI's Responses API (/v1/responses) natively, as vLLM does")
	fs.BoolVar(&cfg.List, "list", false, "print the profiles and exit")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.List {
		return cfg, nil
	}
	if cfg.Options.Speed <= 0 {
		return Config{}, fmt.Errorf("-speed %g: want a factor above 0", cfg.Options.Speed)
	}
	cfg.Options.Model = model
	cfg.Options.Profile = simulation.Zero()
	if !zero {
		p, ok := simulation.Lookup(model, gpu, count)
		if !ok {
			return Config{}, fmt.Errorf("no profile for %dx %s %s; measured: %s (simbackend -list shows all)",
				count, gpu, model, strings.Join(configurations(model), ", "))
		}
		cfg.Options.Profile = p
	}
	return cfg, cfg.Options.Validate()
}

// configurations lists the measured rigs of a model, or every model when it has none.
func configurations(model string) []string {
	var rigs, models []string
	for _, p := range simulation.Profiles() {
		if p.Model == model {
			rigs = append(rigs, fmt.Sprintf("-gpu %s -count %d", p.GPU, p.Count))
		}
		if len(models) == 0 || models[len(models)-1] != p.Model {
			models = append(models, p.Model)
		}
	}
	if len(rigs) == 0 {
		return models
	}
	return rigs
}

func printProfiles(w io.Writer) {
	for _, p := range simulation.Profiles() {
		fmt.Fprintf(w, "-model %s -gpu %s -count %d\n", p.Model, p.GPU, p.Count)
	}
}

// Main is a listening simbackend.
type Main struct {
	Handler *simulation.Handler
	ln      net.Listener
	srv     *http.Server
}

// Listen opens the configured address (port 0 picks a free one) and prepares the server.
func Listen(cfg Config) (*Main, error) {
	if err := cfg.Options.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	h := simulation.NewHandler(cfg.Options)
	return &Main{Handler: h, ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr is the address the server listens on.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// Run serves until the context ends, then lets requests in flight finish for up to five seconds
// before cutting them off.
func (m *Main) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- m.srv.Serve(m.ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(shutdown); err != nil {
		_ = m.srv.Close()
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops the server at once.
func (m *Main) Close() error {
	err := m.srv.Close()
	if cerr := m.ln.Close(); err == nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	return err
}
