package main

// The agent's configuration: its flags, each defaulting to an environment variable, and the secrets, which come
// from the environment only. This file is the only one of the binary that reads the environment, through the
// getenv that main passes in (os.Getenv); README.md's table for gpuagent lists every variable read here, and
// TestReadmeConfigurationTables keeps it so.

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/gpumarket/gpumarket/cmd/gpuagent/agent"
)

// logLevel reads GPUMARKET_LOG_LEVEL: debug, info, warn or error; info when unset or unreadable.
func logLevel(getenv func(string) string) slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(getenv("GPUMARKET_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return level
}

// parseConfig reads the flags, each defaulting to its environment variable, and the secrets from the
// environment.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (agent.Config, error) {
	env := func(name, fallback string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fallback
	}
	envInt := func(name string, fallback int) (int, error) {
		v := getenv(name)
		if v == "" {
			return fallback, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q is not a whole number", name, v)
		}
		return n, nil
	}
	gpus, err := envInt("GPUAGENT_GPU_COUNT", 1)
	if err != nil {
		return agent.Config{}, err
	}
	capacity, err := envInt("GPUAGENT_CAPACITY", 8)
	if err != nil {
		return agent.Config{}, err
	}

	fs := flag.NewFlagSet("gpuagent", flag.ContinueOnError)
	fs.SetOutput(out)
	offeringKey, err := hex.DecodeString(getenv("GPUAGENT_OFFERING_KEY"))
	if err != nil {
		return agent.Config{}, fmt.Errorf("GPUAGENT_OFFERING_KEY: use the hexadecimal key shown with your offering: %w", err)
	}
	cfg := agent.Config{OfferingKey: offeringKey}
	// -addr is where earlier agents listened for the gateway. The agent listens on no port now (the gateway's
	// requests come over its NATS connection); the flag is still taken, and ignored, so that a unit or a command
	// written for an earlier agent keeps working.
	var addr string
	fs.StringVar(&addr, "addr", "", "ignored: the agent listens on no port, the gateway's requests come over NATS")
	fs.StringVar(&cfg.Upstream, "upstream", env("GPUAGENT_UPSTREAM", "http://127.0.0.1:8000"), "base URL of the OpenAI-compatible server, without /v1")
	fs.StringVar(&cfg.ProviderID, "provider", getenv("GPUAGENT_PROVIDER_ID"), "provider id")
	fs.StringVar(&cfg.OfferingID, "offering", getenv("GPUAGENT_OFFERING_ID"), "offering id this rig serves")
	fs.StringVar(&cfg.Model, "model", getenv("GPUAGENT_MODEL"), "the offering's listed model, which the upstream must list in /v1/models")
	fs.StringVar(&cfg.GPUSKU, "gpu", env("GPUAGENT_GPU", "rtx-4090"), "GPU model, a catalog SKU (board power for energy estimates)")
	fs.IntVar(&cfg.GPUCount, "gpus", gpus, "GPUs in the rig")
	fs.IntVar(&cfg.Capacity, "capacity", capacity, "requests the rig serves at once, reported in heartbeats")
	fs.StringVar(&cfg.NATSURL, "nats", env("NATS_URL", "nats://127.0.0.1:4222"), "NATS server URLs, comma-separated")
	fs.StringVar(&cfg.NATSUser, "nats-user", getenv("GPUAGENT_NATS_USER"), "the rig's NATS user (rig-<offering id>)")
	fs.StringVar(&cfg.OutboxDir, "outbox", env("GPUAGENT_OUTBOX", "gpuagent-outbox"), "directory keeping usage events until the platform acknowledged them")
	fs.StringVar(&cfg.NvidiaSMI, "nvidia-smi", env("GPUAGENT_NVIDIA_SMI", "nvidia-smi"), "nvidia-smi command for measured energy; empty to estimate")
	fs.DurationVar(&cfg.TicketMaxAge, "ticket-max-age", agent.DefaultTicketMaxAge, "refuse route tickets issued longer ago")
	if err := fs.Parse(args); err != nil {
		return agent.Config{}, err
	}
	if addr != "" {
		fmt.Fprintln(out, "gpuagent: -addr is ignored: the agent listens on no port; the gateway's requests come over NATS")
	}
	if fs.NArg() > 0 {
		return agent.Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.NATSPassword = getenv("GPUAGENT_NATS_PASSWORD")
	if cfg.NATSUser != "" && cfg.NATSPassword == "" {
		return agent.Config{}, errors.New("-nats-user is set but GPUAGENT_NATS_PASSWORD is not")
	}
	return cfg, nil
}
