package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// This file holds what the benchmark harness (harness.go) and the tests that run the platform in
// processes both use, so that the platform binary builds without the harness and the tests with or
// without it.

// waitFor polls ok until it holds, for up to 30 seconds.
func waitFor(ctx context.Context, what string, ok func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// environWithout is this process's environment without the variables of the prefixes.
func environWithout(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}
