package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/scratchdb"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/metering"
)

// bench runs the whole benchmark; see the package comment.
func bench(ctx context.Context, o options) error {
	d, err := scratchdb.Create(ctx, "gpumarket_closebench_", progress)
	if err != nil {
		return err
	}
	defer d.Drop()
	period := invoicing.PeriodOf(time.Now()).Prev()
	start := time.Now()
	if err := seed(ctx, d, o, period); err != nil {
		return err
	}
	progress("database %s seeded in %s: %d customers, %d providers, %d requests of %s in %d rollup rows",
		d.Name, time.Since(start).Round(time.Millisecond), o.accounts, o.providers, o.events, period, o.events/eventsPerRow)
	if _, err := d.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return err
	}

	svc := invoicing.New(invoicing.Config{Pool: d.Pool, Ledger: ledger.NewLedger(d.Pool, nil), Audit: audit.New(d.Pool, nil),
		UsageChecks: -1, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Seller: invoicing.Party{LegalName: "gpumarket Bench Ltd", Address: "1 Bench Road", Country: "IE"}})
	peak := watchMemory()
	resetPeakRSS()
	began := time.Now()
	last := time.Now()
	pr, err := svc.Close(ctx, invoicing.CloseInput{Period: period, Progress: func(p invoicing.CloseProgress) {
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			progress("closing: customers %d of %d, providers %d of %d", p.CustomersDone, p.CustomersTotal, p.ProvidersDone, p.ProvidersTotal)
		}
	}})
	took := time.Since(began)
	heap := peak()
	rss := peakRSS()
	if err != nil {
		return err
	}
	progress("closed %s in %s: %d invoice and %d statement drafts", period, took.Round(time.Millisecond), pr.Invoices, pr.Statements)
	if err := verify(ctx, d, o, period, pr); err != nil {
		return err
	}
	fmt.Printf("close: %d accounts, %d events in %.1f s\n", o.accounts, o.events, took.Seconds())
	fmt.Printf("peak memory: %.1f MiB of Go heap, %s resident\n", float64(heap)/(1<<20), rss)
	return nil
}

// verify checks the close's outcome against the seed: a draft per customer and per provider,
// and lines that sum the rollups exactly.
func verify(ctx context.Context, d *scratchdb.Database, o options, p invoicing.Period, pr invoicing.CloseProgress) error {
	if pr.Invoices != o.accounts || pr.Statements != o.providers {
		return fmt.Errorf("verify: %d invoices and %d statements, want %d and %d", pr.Invoices, pr.Statements, o.accounts, o.providers)
	}
	rolled, err := metering.SumHourly(ctx, d.Pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	docs, err := invoicing.SumDocuments(ctx, d.Pool)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if rolled.Charge != docs.Charged || rolled.Payable != docs.Payable || docs.InvoiceRequests != int64(o.events) {
		return fmt.Errorf("verify: invoices charge %s of the rollups' %s and statements pay %s of %s, over %d requests of %d",
			docs.Charged, rolled.Charge, docs.Payable, rolled.Payable, docs.InvoiceRequests, o.events)
	}
	progress("verified: %d invoices of %d lines charge %s, the rollups' sum to the picodollar; statements pay %s; %d accounts overdrawn and flagged",
		pr.Invoices, docs.InvoiceLines, docs.Charged, docs.Payable, docs.Flagged[invoicing.FlagNegativeBalance])
	return nil
}

// watchMemory samples the Go heap until the returned function is called, which returns the
// most it saw in use.
func watchMemory() func() uint64 {
	var mu sync.Mutex
	var most uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		most = max(most, m.HeapInuse)
		mu.Unlock()
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() uint64 {
		sample()
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// resetPeakRSS starts the kernel's count of the process's peak resident memory afresh, so that
// the seed's does not count (Linux: /proc/self/clear_refs).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak resident memory since resetPeakRSS, as the kernel counts it.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "(not known here)"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
			}
		}
	}
	return "(not known here)"
}
