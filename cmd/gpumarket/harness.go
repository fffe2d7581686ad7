//go:build benchharness

package main

import "context"

// The benchmark harness (benchgateway.go, benchbatch.go, benchprocess.go) is built only with the
// benchharness tag, into a binary of its own (make bench-gateway, make bench-batch; make build
// writes it to bin/gpumarket-bench): it links the load generator (cmd/loadgen/load), which the
// platform binary has no use for. It is built from this package because what it measures is the
// platform as `gpumarket serve` runs it: the same Config, Open, Run and Close, the embedded NATS,
// the meter, the router and the simulated rigs of rigs.go, none of which is reachable from
// outside this package. The harness binary is the platform binary with the benchmarks added: its
// -processes mode starts `serve` from itself.

// harnessBuilt says whether this binary has the benchmark harness.
const harnessBuilt = true

// runHarness runs the benchmark the subcommand names: bench-gateway or bench-batch.
func runHarness(ctx context.Context, cfg Config, name string, args []string) error {
	if name == "bench-batch" {
		return benchBatch(ctx, cfg, args)
	}
	return benchGateway(ctx, cfg, args)
}
