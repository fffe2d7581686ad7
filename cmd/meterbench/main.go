// Command meterbench measures the meter end to end on this machine: how many usage events per
// second it prices and commits exactly once, how long an event waits from its publication to
// its commit, and how close that comes to what JetStream and PostgreSQL can do here at all.
//
//	meterbench [-n 1000000] [-warmup -1] [-paced -1] [-rate 0] [-batch 0] [-cpuprofile file]
//
// One run, on a fresh database (created on the server of GPUMARKET_TEST_DATABASE_URL, else
// 127.0.0.1:5432, and dropped at the end) and an embedded NATS server in a temporary directory:
//
//  1. The meter runs as `gpumarket meter` runs it, with its production stream and batch
//     settings and its feed to the routers, waiting on the empty usage stream. The gateway's
//     record of every request of both rounds is written first, by COPY, as the gateway writes
//     it when it relays a response (the meter bills each event against its record, within
//     the bounds its route ticket carries); then the machine's dirty pages are written out and
//     PostgreSQL is checkpointed, so that the run does not pay for earlier work.
//  2. A warm-up round first meters -warmup events (by default a tenth of N, at most 100,000)
//     the way the measured round does, unmeasured, so that the figures are those of a meter
//     in its working state rather than of its first seconds on a machine fresh from other
//     work. Then, for the measured round, a separate process (this program again, in its
//     publish mode, standing for the rigs) signs N valid events for several customers and offerings, with the
//     terms and bounds the gateway's tickets carry, then publishes them as fast as
//     the stream takes them (or at -rate events per second), each stamped with the time it is
//     published. That round's rate is N over the time from the first publication to the last
//     commit; the latency of an event is its commit time minus its stamp. Flat out, the
//     latency is mostly the queue that builds when the rigs publish faster than the meter
//     meters; the paced round (step 4) measures it at a load the meter keeps up with.
//     A backlog round of N more events follows: the publisher publishes them all with the meter
//     stopped, then the meter starts and is timed from its start to its last commit, the
//     meter's own rate on the work the ceilings do (docs/usage-storage.md).
//  3. The ceilings, on the same messages and rows, measured after the meter has finished so
//     that neither takes the machine from the other: a plain pull consumer of its own on the
//     same stream fetches and acknowledges all N messages as the meter's consumer does (same
//     client, same pull size, one ack per message); and pgx CopyFrom writes the same usage
//     rows, as plain Go values that pgx encodes (the meter writes the same binary rows
//     without pgx's encoding), in batches of the meter's size each committed, into a scratch table shaped like usage_events (same columns, constraints and
//     indexes, but no foreign keys). C is the lower of the two: what this machine could do if
//     metering were only moving the messages into the table.
//  4. A paced round then publishes -paced more events at 40% of E, as rigs do on an ordinary
//     day, and reports the latency of its events from publication to commit: what the meter's
//     batching and its wait for the gateway's records cost an event when there is no backlog.
//     Before it, the dirty pages of the rounds and ceilings before are written out and
//     PostgreSQL checkpointed, as before the run: the ceilings' bulk writes are not an ordinary
//     day's load.
//  5. Exactly once is checked over every round: every distinct event stored, none rejected or flagged,
//     charges equal to the workload's own sum, the ledger balanced and equal to the charges,
//     the rollups and the API keys' monthly spend equal to the rows.
//
// Progress goes to stderr, with where the machine's CPU went while the meter ran (this
// process, which holds the meter and the NATS server; the publisher; the PostgreSQL processes
// working for the run's database; anything else, such as other work on the machine). The
// lines on stdout give the latencies, flat out and paced, and the last one reads
// "meter: <E> events/s; ceiling: <C> events/s; ratio: <E/C>", E the backlog round's rate.
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
	// The meter's and the NATS server's own logs would drown the progress lines: only
	// warnings and errors from them.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 && os.Args[1] == publishMode {
		err = publish(ctx, os.Stdin, os.Stdout)
	} else {
		err = bench(ctx, os.Args[1:])
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "meterbench:", err)
		os.Exit(1)
	}
}

// options are the benchmark's flags.
type options struct {
	events     int
	warmup     int
	paced      int
	rate       int
	batchSize  int
	cpuProfile string
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("meterbench", flag.ContinueOnError)
	fs.IntVar(&o.events, "n", 1_000_000, "events to publish and meter")
	fs.IntVar(&o.warmup, "warmup", -1, "events to meter first, unmeasured (-1: a tenth of -n, at most 100,000)")
	fs.IntVar(&o.paced, "paced", -1, "events to meter last at 40% of the measured round's rate, for the latency at an ordinary load (-1: a fifth of -n, at most 200,000; 0: no paced round)")
	fs.IntVar(&o.rate, "rate", 0, "events per second to publish in the measured round (0: as fast as the stream takes them)")
	fs.IntVar(&o.batchSize, "batch", 0, "the meter's batch size (0: the meter's default)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process while the meter drains the backlog round")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.events < 1 || o.rate < 0 || o.warmup < -1 || o.paced < -1 {
		return o, errors.New("-n must be at least 1, -rate, -warmup and -paced at least 0")
	}
	if o.warmup == -1 {
		o.warmup = min(o.events/10, 100_000)
	}
	if o.paced == -1 {
		o.paced = min(o.events/5, 200_000)
	}
	return o, nil
}

// progress prints a progress line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "meterbench: "+format+"\n", args...)
}
