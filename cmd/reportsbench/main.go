// Command reportsbench measures the savings and carbon reports on this machine: their p99
// latency at a steady rate of requests over millions of usage rows, against the p99 of a
// handler that only asks the database for SELECT 1 at the same rate in the same run.
//
//	reportsbench [-events 10000000] [-accounts 1000] [-days 60] [-rate 100] [-duration 20s]
//
// One run, on a fresh database (created on the server of GPUMARKET_TEST_DATABASE_URL, else
// 127.0.0.1:5432, and dropped at the end):
//
//  1. -days days to today are seeded: -events usage rows of -accounts customers on rigs in
//     several regions and sites, written by COPY (metering.CopyUsage), and the hourly rollups
//     that sum them (as the meter keeps them, metering.RollUpCopiedUsage), with a realtime
//     price change half way.
//  2. The reports' query plans are checked: both read usage_hourly through
//     usage_hourly_account_idx.
//  3. An HTTP server answers /savings and /carbon (the last 30 days by day, of an account
//     named in the query) and /ping (SELECT 1). Requests arrive at -rate a second, open loop,
//     on random accounts, alternating the two reports, for -duration; then /ping the same way.
//
// The last lines on stdout read
// "reports: p99 <X> ms at <R> rps over <N> rows" and
// "baseline: p99 <Y> ms for SELECT 1 at <R> rps; reports at <X/Y>x the baseline".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := parseOptions(os.Args[1:])
	if err == nil {
		err = bench(ctx, o)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "reportsbench:", err)
		os.Exit(1)
	}
}

type options struct {
	events, accounts, days, rate int
	duration                     time.Duration
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("reportsbench", flag.ContinueOnError)
	fs.IntVar(&o.events, "events", 10_000_000, "usage rows to seed")
	fs.IntVar(&o.accounts, "accounts", 1000, "customer accounts the rows are spread over")
	fs.IntVar(&o.days, "days", 60, "days to today the rows are spread over")
	fs.IntVar(&o.rate, "rate", 100, "report requests a second")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "how long each measurement lasts")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.events < o.accounts || o.accounts < 1 || o.days < 31 || o.rate < 1 || o.duration <= 0 {
		return o, errors.New("need -events >= -accounts >= 1, -days >= 31, -rate >= 1 and a -duration")
	}
	return o, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "reportsbench: "+format+"\n", args...)
}
