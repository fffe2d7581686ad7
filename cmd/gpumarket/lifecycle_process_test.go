//go:build linux

// Linux only, as the restart test: the platform child process is tied to this test process with Pdeathsig.

package main

import (
	"errors"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/credits/stripemock/stripemocktest"
	"github.com/gpumarket/gpumarket/services/testlog"
)

// `gpumarket serve` as its own process, as production runs it: when the NATS server refuses its credential, the
// meter's stream of messages closes, the other parts stop in order, and the process exits with status 1 and the
// meter's error, for its supervisor to restart it.
func TestServeExitsNonZeroWhenAPartFails(t *testing.T) {
	dbtest.SkipShort(t)
	_, dbURL := dbtest.NewWithURL(t)
	dir := t.TempDir()
	bin := buildGPUMarket(t, dir)
	n := startRevocableNATS(t)
	addr := freeAddr(t)
	var out testlog.Buffer
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(environWithout("GPUMARKET_", "DATABASE_URL=", "NATS_URL=", "STRIPE_"),
		"DATABASE_URL="+dbURL,
		"NATS_URL="+n.platformURL,
		"GPUMARKET_ADDR="+addr,
		"GPUMARKET_DATA_DIR="+dir,
		"GPUMARKET_SESSION_KEY="+strings.Repeat("s", 32),
		"GPUMARKET_TICKET_KEY="+strings.Repeat("t", 32),
		"GPUMARKET_RIG_KEY="+strings.Repeat("r", 32),
		"GPUMARKET_PAYMENTS=test", // stripe-mock started by the process, and stopped with it
		"STRIPE_MOCK_BIN="+stripemocktest.Bin(t),
		"STRIPE_WEBHOOK_SECRET=whsec_lifecycle_test",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("gpumarket serve's output:\n%s", out.String())
		}
	})
	waitServing(t, "http://"+addr+"/healthz", exited)

	n.revoke(t)
	var err error
	select {
	case err = <-exited:
		exited <- err // for the cleanup
	case <-time.After(60 * time.Second):
		t.Fatal("gpumarket serve still runs after its meter failed")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("gpumarket serve ended with %v; want exit status 1", err)
	}
	const want = "gpumarket: meter: metering: the consumer's message stream closed; the meter must restart"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("gpumarket serve's output does not end with the meter's error %q", want)
	}
	if got := stoppedParts(out.String()); !slices.Equal(got, stopOrder) {
		t.Fatalf("parts stopped in the order %q; want %q", got, stopOrder)
	}
}

// waitServing waits until url answers 200, failing when the process exits first or it takes 60 s.
func waitServing(t *testing.T, url string, exited chan error) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if res, err := client.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("gpumarket serve exited before it answered: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("gpumarket serve did not answer /healthz within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
