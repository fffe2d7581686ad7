package natsserver

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/testlog"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
)

func TestStreamDeduplicatesByMsgIDAndDeliversToPullConsumer(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	s, logs := startServer(t, EmbeddedOptions{StoreDir: storeDir})
	_, js := connect(t, s.ClientURL(), logs)
	ctx := t.Context()

	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "TEST",
		Subjects: []string{"test.>"},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}

	publish := func() *jetstream.PubAck {
		t.Helper()
		msg := nats.NewMsg("test.usage.p1.o1")
		msg.Data = []byte(`{"request_id":"req-1","output_tokens":42}`)
		msg.Header.Set(jetstream.MsgIDHeader, "evt-1")
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if first := publish(); first.Duplicate || first.Stream != "TEST" {
		t.Fatalf("first publish: ack %+v, want a new message in TEST", first)
	}
	if second := publish(); !second.Duplicate {
		t.Fatalf("second publish with the same Nats-Msg-Id: ack %+v, want it flagged duplicate", second)
	}

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want 1 after a duplicate publish", info.State.Msgs)
	}
	if _, err := os.Stat(filepath.Join(storeDir, "jetstream")); err != nil {
		t.Errorf("JetStream keeps nothing under StoreDir: %v", err)
	}

	consumer, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   "meter",
		AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := consumer.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for msg := range batch.Messages() {
		got = append(got, msg)
		if err := msg.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("fetched %d messages, want 1", len(got))
	}
	if got[0].Subject() != "test.usage.p1.o1" ||
		string(got[0].Data()) != `{"request_id":"req-1","output_tokens":42}` ||
		got[0].Headers().Get(jetstream.MsgIDHeader) != "evt-1" {
		t.Errorf("fetched %s %q with id %q, want the published event",
			got[0].Subject(), got[0].Data(), got[0].Headers().Get(jetstream.MsgIDHeader))
	}
}

func TestStartEmbeddedTakesAFreePortWhenAskedOneIsTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port

	s, logs := startServer(t, EmbeddedOptions{Port: takenPort, StoreDir: t.TempDir()})

	port := s.Addr().(*net.TCPAddr).Port
	if port == takenPort {
		t.Fatalf("server says it listens on the taken port %d", port)
	}
	want := fmt.Sprintf("port %d is taken; embedded NATS listens on 127.0.0.1:%d instead", takenPort, port)
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, logs)
	}
	nc, js := connect(t, s.ClientURL(), logs)
	if err := events.Ping(t.Context(), nc); err != nil {
		t.Errorf("Ping on the fallback port: %v", err)
	}
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Errorf("JetStream on the fallback port: %v", err)
	}
}

func TestConnectionOutlivesAServerRestart(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	s, logs := startServer(t, EmbeddedOptions{StoreDir: storeDir})
	port := s.Addr().(*net.TCPAddr).Port
	nc, js := connect(t, s.ClientURL(), logs)
	ctx := t.Context()

	if err := events.Ping(ctx, nc); err != nil {
		t.Fatalf("Ping on a live server: %v", err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "test.kept", []byte("kept"), jetstream.WithMsgID("evt-kept")); err != nil {
		t.Fatal(err)
	}

	s.Shutdown()
	s.WaitForShutdown()
	if err := events.Ping(ctx, nc); err == nil {
		t.Fatal("Ping after the server shut down = nil, want an error")
	}

	startServer(t, EmbeddedOptions{Port: port, StoreDir: storeDir})
	deadline := time.Now().Add(10 * time.Second)
	for events.Ping(ctx, nc) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the connection did not come back within 10s (status %s)", nc.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []string{"NATS connection lost; reconnecting", "NATS connection restored"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	stream, err := js.Stream(ctx, "TEST")
	if err != nil {
		t.Fatalf("the stream is gone after the restart: %v", err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "test.kept")
	if err != nil {
		t.Fatalf("the stream lost its message across the restart: %v", err)
	}
	if string(msg.Data) != "kept" {
		t.Errorf("message after restart = %q, want %q", msg.Data, "kept")
	}
}

func TestStartEmbeddedRefusesAStoreDirItCannotUse(t *testing.T) {
	t.Parallel()
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, storeDir := range map[string]string{
		"none":                 "",
		"under a regular file": filepath.Join(notADir, "store"),
	} {
		t.Run(name, func(t *testing.T) {
			log, _ := testLogger(t)
			start := time.Now()
			s, err := StartEmbedded(EmbeddedOptions{StoreDir: storeDir, Log: log})
			if err == nil {
				s.Shutdown()
				t.Fatalf("StartEmbedded(StoreDir %q) = nil error", storeDir)
			}
			if took := time.Since(start); took > readyTimeout/2 {
				t.Errorf("StartEmbedded took %s to fail, want it to fail fast", took)
			}
		})
	}
}

// startServer starts an embedded server that is shut down when the test ends, logging into the returned buffer.
func startServer(t *testing.T, opts EmbeddedOptions) (*server.Server, *testlog.Buffer) {
	t.Helper()
	log, logs := testLogger(t)
	opts.Log = log
	s, err := StartEmbedded(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s, logs
}

// connect connects to url, logging into logs, and closes the connection when the test ends.
func connect(t *testing.T, url string, logs *testlog.Buffer) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := events.Connect(t.Context(), url, t.Name(), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, js
}

// testLogger is testlog.New: a logger the test can read, shown when it fails.
func testLogger(t *testing.T) (*slog.Logger, *testlog.Buffer) { return testlog.New(t) }
