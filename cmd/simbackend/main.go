// Command simbackend is an OpenAI-compatible inference server that behaves like a GPU profile
// measured by the public benchmark (package simulation): time to first token and time per
// output token drawn as the profile measured them at the current concurrency, deterministic
// text. It stands in for vLLM behind gpuagent in development, demos and tests. Like vLLM with
// prefix caching, it reports the prompt tokens it served before as cached
// (usage.prompt_tokens_details.cached_tokens): the second request of a conversation shows the
// first one's messages cached (-prefix-cache=false turns that off). With -native it also serves
// the Anthropic Messages API (POST /v1/messages) and OpenAI's Responses API (POST /v1/responses)
// natively, as vLLM does, answering them as it answers the same conversation on chat
// completions; without it those paths are 404.
//
//	simbackend [-addr 127.0.0.1:8000] [-model M] [-gpu h100-pcie|rtx-4090] [-count N]
//	           [-zero] [-speed F] [-fail-rate F] [-seed S] [-prefix-cache=false] [-native]
//	simbackend -list
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], log); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "simbackend:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	if cfg.List {
		printProfiles(os.Stdout)
		return nil
	}
	m, err := Listen(cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	log.Info("simbackend serving", "addr", m.Addr(), "model", m.Handler.Model(), "profile", cfg.Options.Profile.String(),
		"speed", cfg.Options.Speed, "fail_rate", cfg.Options.FailRate, "prefix_cache", cfg.Options.PrefixCache, "native", cfg.Options.Native)
	return m.Run(ctx)
}
