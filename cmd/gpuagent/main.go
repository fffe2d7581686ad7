// Command gpuagent is the provider's sidecar: it sits in front of an OpenAI-compatible inference server (vLLM,
// llama.cpp's server, simbackend), serves only requests the GPU Market gateway routed to its offering, and
// reports each request's usage to the platform over NATS JetStream (package agent says how).
//
//	gpuagent -provider P -offering O -model M -gpu rtx-4090 -gpus 4 -capacity 16 \
//	         [-upstream http://127.0.0.1:8000] [-nats nats://host:4222] \
//	         [-nats-user rig-O] [-outbox DIR] [-nvidia-smi nvidia-smi] [-ticket-max-age 10m]
//
// Every flag can be set in the environment instead (the flag wins): GPUAGENT_UPSTREAM,
// GPUAGENT_PROVIDER_ID, GPUAGENT_OFFERING_ID, GPUAGENT_MODEL, GPUAGENT_GPU, GPUAGENT_GPU_COUNT, GPUAGENT_CAPACITY, NATS_URL,
// GPUAGENT_NATS_USER, GPUAGENT_NATS_PASSWORD, GPUAGENT_OUTBOX, GPUAGENT_NVIDIA_SMI. Secrets come from the
// environment only: GPUAGENT_OFFERING_KEY (the key that verifies this offering's route tickets) and GPUAGENT_NATS_PASSWORD (the rig's NATS
// password, shown to the provider with the offering). GPUMARKET_LOG_LEVEL sets the log level (info).
//
// Before it serves, it checks its upstream and its credentials (agent.Preflight) and exits with a plain message
// when either is wrong.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(os.Getenv)}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, log); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "gpuagent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer, log *slog.Logger) error {
	cfg, err := parseConfig(args, getenv, out)
	if err != nil {
		return err
	}
	cfg.Log = log
	if cfg.Model == "" {
		log.Warn("no -model: the upstream's models are not checked against the offering's")
	}
	if err := agent.Preflight(ctx, cfg); err != nil {
		return err
	}
	log.Info("preflight passed: the upstream answers, lists the model when one is given, and the platform lets this rig in",
		"upstream", cfg.Upstream, "model", cfg.Model, "nats", cfg.NATSURL, "user", cfg.NATSUser)
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Run(ctx)
}
