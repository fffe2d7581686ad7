// Command closebench measures the month's close on this machine: how long closing a month of
// many customers and millions of requests takes, and how much memory the close holds while
// it runs, which must not grow with the number of requests.
//
//	closebench [-accounts 10000] [-events 10000000] [-providers 50]
//
// One run, on a fresh database (created on the server of GPUMARKET_TEST_DATABASE_URL, else
// 127.0.0.1:5432, and dropped at the end):
//
//  1. The previous calendar month is seeded through the hourly rollups: the rows the meter
//     would have kept for -events requests of -accounts customers over -providers providers'
//     offerings (ten requests a row, one of them without output and so not charged; three
//     offerings a customer; a price change on the 16th); then the ledger postings the meter
//     posts for them (one usage transaction per customer, as if the month were one batch: the
//     customer's credit down by its charges, each provider's payable up by its asks, the
//     platform's revenue the margin), and a purchase of credit per customer at the month's
//     start, small enough for a quarter of them to end the month overdrawn. Every row is
//     written by COPY, through the owners' bulk loads (metering.CopyHourly,
//     ledger.CopyTransactions and the like).
//  2. The close runs as `gpumarket invoices close` runs it, with its default chunk of accounts
//     per transaction; the exact check of a sample against usage_events is off, since the
//     benchmark writes rollups and not the usage rows they would sum.
//  3. The outcome is checked: one draft per customer and per provider, and the lines' charges
//     adding up to the rollups' to the picodollar.
//
// The last lines on stdout read
// "close: <A> accounts, <E> events in <S> s" and
// "peak memory: <H> MiB of Go heap, <R> MiB resident".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o, err := parseOptions(os.Args[1:])
	if err == nil {
		err = bench(ctx, o)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "closebench:", err)
		os.Exit(1)
	}
}

// options are the benchmark's flags.
type options struct {
	accounts, events, providers int
}

// eventsPerRow is how many requests each seeded rollup row sums.
const eventsPerRow = 10

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("closebench", flag.ContinueOnError)
	fs.IntVar(&o.accounts, "accounts", 10_000, "customer accounts with usage in the month")
	fs.IntVar(&o.events, "events", 10_000_000, "requests in the month, in rollups of ten")
	fs.IntVar(&o.providers, "providers", 50, "providers, with two offerings each")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.accounts < 1 || o.providers < 2:
		return o, errors.New("-accounts must be at least 1 and -providers at least 2")
	case o.events%(o.accounts*eventsPerRow) != 0:
		return o, fmt.Errorf("-events must be a multiple of ten per account (%d)", o.accounts*eventsPerRow)
	case o.events/(o.accounts*eventsPerRow) > 672:
		return o, errors.New("at most one rollup row per account and hour: -events is at most 6720 per account")
	}
	return o, nil
}

// progress prints a progress line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "closebench: "+format+"\n", args...)
}
