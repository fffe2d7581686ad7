package metering

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/testlog"
	"github.com/gpumarket/gpumarket/services/usage"
)

// connectTo is a client of the node at url with JetStream, closed at the test's end.
func connectTo(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A meter started while its NATS cluster has no JetStream leader (one node of three up) waits,
// saying what it waits for, and sets up its streams once the other nodes come and elect one.
func TestTheMeterWaitsForTheJetStreamLeader(t *testing.T) {
	cluster := newNATSCluster(t)
	cluster.start(0)
	js := connectTo(t, cluster.urls(0))
	log, buf := testlog.New(t)

	done := make(chan error, 1)
	go func() {
		_, err := usage.EnsureStreams(context.Background(), js, usage.StreamOptions{Replicas: 3, Log: log, WaitForJetStream: time.Minute})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("EnsureStreams returned while no JetStream leader could be elected: %v", err)
	case <-time.After(7 * time.Second): // past one unanswered attempt (5 s) and its retry
	}
	if !strings.Contains(buf.String(), `msg="waiting for JetStream"`) || !strings.Contains(buf.String(), "elect a JetStream leader") {
		t.Fatalf("nothing logged about the wait:\n%s", buf)
	}
	cluster.start(1)
	cluster.start(2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("EnsureStreams once the leader was elected: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("EnsureStreams did not finish within 45 s of the cluster being whole")
	}
	s, err := js.Stream(context.Background(), events.UsageStream)
	if err != nil || s.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("the usage stream after the wait: %v", err)
	}
	if !strings.Contains(buf.String(), `msg="JetStream answered"`) {
		t.Errorf("the end of the wait was not logged:\n%s", buf)
	}
}

// When the leader never comes, the meter gives up at its deadline with what it waited for and the
// last failure, never "bucket not found".
func TestTheMeterSaysWhatFailedWhenJetStreamNeverAnswers(t *testing.T) {
	cluster := newNATSCluster(t)
	cluster.start(0)
	js := connectTo(t, cluster.urls(0))
	log, _ := testlog.New(t)
	start := time.Now()
	_, err := usage.EnsureStreams(context.Background(), js, usage.StreamOptions{Replicas: 3, Log: log, WaitForJetStream: 3 * time.Second})
	if err == nil {
		t.Fatal("EnsureStreams succeeded on one node of three")
	}
	if took := time.Since(start); took < 2*time.Second || took > 15*time.Second {
		t.Errorf("gave up after %s, want about its 3 s deadline", took)
	}
	msg := err.Error()
	if strings.Contains(msg, "bucket not found") || !strings.Contains(msg, "JetStream did not answer within") ||
		!strings.Contains(msg, "elect a JetStream leader") {
		t.Fatalf("error %q, want it to say JetStream did not answer and what it waited for", msg)
	}
}
