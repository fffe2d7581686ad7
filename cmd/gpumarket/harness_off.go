//go:build !benchharness

package main

import (
	"context"
	"fmt"
)

// harnessBuilt says whether this binary has the benchmark harness: the platform binary has not
// (harness.go says why and where it is built).
const harnessBuilt = false

// runHarness refuses the benchmark's subcommands and says where the harness is.
func runHarness(_ context.Context, _ Config, name string, _ []string) error {
	return fmt.Errorf("%s is not in the platform binary: run make %s, or go run -tags benchharness ./cmd/gpumarket %s", name, name, name)
}
