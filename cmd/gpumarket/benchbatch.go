//go:build benchharness

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/cmd/internal/cpuuse"
	"github.com/gpumarket/gpumarket/cmd/internal/devenv"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// benchBatch is `gpumarket-bench bench-batch` (make bench-batch): what running a request as a batch line
// costs over sending it to the rig directly.
//
//	gpumarket-bench bench-batch [-lines 50000] [-concurrency 16] [-direct 5000] [-max-tokens 8]
//
// On the platform bench-gateway starts (startBenchPlatform: a fresh database, embedded NATS, the
// meter, one zero-latency simulated rig behind its gpuagent), with GPUMARKET_BATCH_CONCURRENCY set
// to -concurrency and the offering listed in the batch tier. Routing would promote a zero-latency
// rig out of the batch tier as soon as it measures it (routing/tiers.go), leaving batch lines no
// offering; the benchmark holds tiers still by writing routing's figures only once a day.
//
//  1. Direct: -direct chat completions sent straight to the agent with a route ticket, by
//     -concurrency clients at once, timed from first to last.
//  2. Batch: a file of -lines chat completions, the same body each, uploaded with the official
//     SDK, a batch created from it and polled every second until it ends, timed from its creation
//     to when it is seen completed: checking, admission, every line through the gateway, and the
//     output file.
//
// It prints "batch: <L> lines/s, overhead <X> us per line over direct calls", where L is lines
// over the batch's time and X the CPU a line costs beyond a direct call: this process's CPU per
// line less its CPU per direct call, plus the same for PostgreSQL (the target is 2 ms on a
// 2-core machine). Beside it, the time a line holds a worker beyond a direct call,
// concurrency x (1/L - 1/D) with D the direct calls per second, and the process's peak memory.
func benchBatch(ctx context.Context, env Config, args []string) error {
	fs := flag.NewFlagSet("bench-batch", flag.ContinueOnError)
	lines := fs.Int("lines", 50_000, "lines of the batch")
	concurrency := fs.Int("concurrency", 16, "batch lines in flight at once (GPUMARKET_BATCH_CONCURRENCY), and direct clients")
	direct := fs.Int("direct", 5_000, "direct calls to time")
	maxTokens := fs.Int("max-tokens", 8, "max_tokens of each request")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *lines < 1 || *lines > 50_000 || *concurrency < 1 || *direct < 1 || *maxTokens < 1 {
		return errors.New("-lines is 1 to 50000; -concurrency, -direct and -max-tokens are positive")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	adminURL := env.TestDatabaseURL
	if adminURL == "" {
		var err error
		if adminURL, err = devenv.EnsureTestPostgres(ctx, env.DatabaseURL, env.DataDir, log); err != nil {
			return err
		}
	}
	dbURL, drop, err := createScratchDatabase(ctx, adminURL)
	if err != nil {
		return err
	}
	defer drop()
	dataDir, err := os.MkdirTemp(benchTempRoot(), "gpumarket-bench-batch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	b, err := startBenchPlatform(ctx, dbURL, dataDir, log, benchSetup{p50: 1000, p99: 2000, adjust: func(c *Config) {
		c.BatchConcurrency = *concurrency
		c.routingFlushEvery = 24 * time.Hour
	}})
	if err != nil {
		return err
	}
	defer b.close()
	body, err := json.Marshal(map[string]any{"model": benchModel, "max_tokens": *maxTokens,
		"messages": []map[string]string{{"role": "user", "content": "Write one line about consumer GPUs serving batch traffic."}}})
	if err != nil {
		return err
	}

	database := ""
	if u, err := url.Parse(dbURL); err == nil {
		database = strings.TrimPrefix(u.Path, "/")
	}
	before := cpuuse.Take(database)
	directRate, err := b.directCalls(ctx, body, *direct, *concurrency)
	if err != nil {
		return err
	}
	benchProgress("direct: %d calls at %.0f/s with %d at once", *direct, directRate, *concurrency)
	// The CPU of a call includes its usage event's way through the agent's outbox, the stream
	// and the meter, which may run on after the last answer: each phase is sampled once all its
	// events are metered.
	if err := b.waitMetered(ctx); err != nil {
		return err
	}
	directCPU := cpuuse.Take(database).Since(before)

	path := filepath.Join(dataDir, "input.jsonl")
	if err := writeBatchInput(path, body, *lines); err != nil {
		return err
	}
	before = cpuuse.Take(database)
	batchRate, counts, err := b.runBatch(ctx, path, *lines)
	if err != nil {
		return err
	}
	if err := b.waitMetered(ctx); err != nil {
		return err
	}
	batchCPU := cpuuse.Take(database).Since(before)
	// What a line costs the platform: this process's CPU per line (gateway, scheduler, meter,
	// embedded NATS, and the agent and simulated rig) less its CPU per direct call (the client,
	// the agent and the rig), plus PostgreSQL's per line less its per direct call.
	perLine := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	selfOver := perLine(batchCPU.Self, *lines) - perLine(directCPU.Self, *direct)
	pgOver := perLine(batchCPU.Postgres, *lines) - perLine(directCPU.Postgres, *direct)
	overhead := selfOver + pgOver
	wallOverhead := float64(*concurrency) * (1/batchRate - 1/directRate) * 1e6
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("\nbatch benchmark: %d chat completions (max_tokens %d) to a zero-latency simbackend behind its gpuagent, "+
		"%d in flight; %d CPUs; %d lines completed, %d failed\n", *lines, *maxTokens, *concurrency, runtime.GOMAXPROCS(0), counts.Completed, counts.Failed)
	fmt.Printf("direct: %.0f calls/s, CPU %.0f us per call in this process and %.0f us in PostgreSQL\n", directRate,
		perLine(directCPU.Self, *direct), perLine(directCPU.Postgres, *direct))
	fmt.Printf("batch CPU: %.0f us per line in this process and %.0f us in PostgreSQL; a line holds a worker %.0f us longer than a direct call\n",
		perLine(batchCPU.Self, *lines), perLine(batchCPU.Postgres, *lines), wallOverhead)
	fmt.Printf("memory: %d MiB at most (this process's peak resident set; target 300 MiB)\n", ru.Maxrss/1024)
	fmt.Printf("batch: %.0f lines/s, overhead %d us per line over direct calls (CPU; target 2000 us, ratio %.2f)\n", batchRate,
		int64(math.Round(overhead)), overhead/2000)
	return nil
}

// waitMetered waits until the rig's outbox is empty and the meter has taken every event of the
// usage stream, for up to five minutes.
func (b *benchPlatform) waitMetered(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		outbox := b.rig.agent.Stats().Outbox
		var pending uint64
		var acks int
		c, err := b.p.js.Consumer(ctx, events.UsageStream, events.UsageConsumer)
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = c.Info(ctx); err == nil {
				pending, acks = info.NumPending, info.NumAckPending
			}
		}
		if err == nil && outbox == 0 && pending == 0 && acks == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("usage events not metered after five minutes: %d in the rig's outbox, %d in the stream, %d being metered (%v)",
				outbox, pending, acks, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// directCalls sends n chat completions straight to the agent, conc at once, and returns calls per second.
func (b *benchPlatform) directCalls(ctx context.Context, body []byte, n, conc int) (float64, error) {
	now := time.Now()
	tk, err := b.signer.Sign(ticket.Claims{RequestID: services.NewTimeOrderedID("req_", now), AccountID: b.customer.AccountID,
		APIKeyID: b.key.ID, OfferingID: b.offering.ID, Tier: string(b.offering.Tier), IssuedAt: now})
	if err != nil {
		return 0, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}, Timeout: benchRequestTimeout}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.agentURL()+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(ticket.Header, tk)
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d of %d direct calls failed", failed.Load(), n)
	}
	return float64(n) / elapsed.Seconds(), nil
}

func writeBatchInput(path string, body []byte, lines int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i := range lines {
		raw, err := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("line-%d", i), "method": "POST",
			"url": "/v1/chat/completions", "body": json.RawMessage(body)})
		if err != nil {
			f.Close()
			return err
		}
		w.Write(raw)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runBatch uploads the file, creates a batch and polls it until it ends; it returns lines per second
// from creation to completion.
func (b *benchPlatform) runBatch(ctx context.Context, path string, lines int) (float64, openai.BatchRequestCounts, error) {
	client := openai.NewClient(option.WithBaseURL(b.p.URL()+"/v1/"), option.WithAPIKey(b.secret), option.WithMaxRetries(0))
	f, err := os.Open(path)
	if err != nil {
		return 0, openai.BatchRequestCounts{}, err
	}
	defer f.Close()
	file, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(f, "bench.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		return 0, openai.BatchRequestCounts{}, err
	}
	benchProgress("uploaded %s: %d bytes", file.ID, file.Bytes)
	start := time.Now()
	bt, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		return 0, openai.BatchRequestCounts{}, err
	}
	lastReport := time.Now()
	for {
		select {
		case <-ctx.Done():
			return 0, openai.BatchRequestCounts{}, ctx.Err()
		case <-time.After(time.Second):
		}
		if bt, err = client.Batches.Get(ctx, bt.ID); err != nil {
			return 0, openai.BatchRequestCounts{}, err
		}
		switch bt.Status {
		case openai.BatchStatusCompleted:
			elapsed := time.Since(start)
			if bt.RequestCounts.Completed != int64(lines) {
				return 0, bt.RequestCounts, fmt.Errorf("the batch completed %d of %d lines", bt.RequestCounts.Completed, lines)
			}
			return float64(lines) / elapsed.Seconds(), bt.RequestCounts, nil
		case openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
			return 0, bt.RequestCounts, fmt.Errorf("the batch ended %s: %+v", bt.Status, bt.Errors)
		}
		if time.Since(lastReport) > 5*time.Second {
			benchProgress("batch %s: %s, %d of %d lines done", bt.ID, bt.Status, bt.RequestCounts.Completed, lines)
			lastReport = time.Now()
		}
	}
}
