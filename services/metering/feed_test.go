package metering

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natstest"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events/natsserver"
)

// TestFeedCarriesEachStoredEventOnce: after its batch commits, every stored event goes out on the feed once,
// with what routing needs of it; a redelivery of a stored event and a refused event do not.
func TestFeedCarriesEachStoredEventOnce(t *testing.T) {
	e := setupMeter(t)
	cfg := e.meter.cfg
	cfg.OnCommit = NewFeed(e.nc, nil).OnCommit
	e.meter = NewMeter(cfg)
	sub, err := e.nc.SubscribeSync(events.MeteredSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute).Truncate(time.Microsecond)
	var ids []string
	var first []byte
	for i := range 3 {
		id, body := e.event(t, 10, int64(1+i), at)
		e.publish(t, subject, id, body)
		ids = append(ids, id)
		if i == 0 {
			first = body
		}
	}
	e.publish(t, subject, "", []byte(`{"not":"an event"}`))
	e.drain(t)
	e.publish(t, subject, "", first) // a copy past the stream's dedupe window: a duplicate
	e.drain(t)

	var got []Metered
	for len(got) < 3 {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("after %d events on the feed: %v", len(got), err)
		}
		m, err := DecodeFeed(msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m...)
	}
	if msg, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("more on the feed than the stored events: %s", msg.Data)
	}
	slices.SortFunc(got, func(a, b Metered) int { return int(a.Usage.OutputTokens - b.Usage.OutputTokens) })
	for i, m := range got {
		u := m.Usage
		if u.OfferingID != e.offering || !strings.HasPrefix(u.RequestID, "req_") || !m.At.Equal(at) || u.TTFTMillis != 100 ||
			u.DurationMillis != 900 || u.InputTokens != 10 || u.OutputTokens != int64(1+i) || u.Status != usage.StatusOK {
			t.Errorf("feed event %d: %+v at %s; want the stored event's figures at %s", i, u, m.At, at)
		}
	}
	if got[0].Usage.RequestID == got[1].Usage.RequestID || got[1].Usage.RequestID == got[2].Usage.RequestID {
		t.Errorf("request ids %v: want three requests", got)
	}
}

// TestFeedMessagesAreChunkedAndGroupedByOffering: a full batch of the longest request ids goes out in messages of
// at most feedChunk events, each well under NATS's default maximum payload, and reads back as it was.
func TestFeedMessagesAreChunkedAndGroupedByOffering(t *testing.T) {
	t.Parallel()
	const n = DefaultBatchSize
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	usages, occurred := make([]usage.Usage, n), make([]time.Time, n)
	statuses := []usage.Status{usage.StatusOK, usage.StatusError, usage.StatusCanceled}
	for i := range usages {
		id := fmt.Sprintf("req_%d_", i)
		usages[i] = usage.Usage{RequestID: id + strings.Repeat("x", usage.MaxIDLength-len(id)), OfferingID: fmt.Sprintf("off-%d", i%3),
			Ticket: "not carried", Model: "not carried", EnergyJoules: 1, TTFTMillis: float64(i) + 0.123456789,
			DurationMillis: 2000.5, InputTokens: int64(i), OutputTokens: int64(2 * i), Status: statuses[i%3]}
		occurred[i] = base.Add(-time.Duration(i) * time.Millisecond)
	}
	msgs, err := EncodeFeed(usages, occurred)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != n/feedChunk {
		t.Fatalf("%d messages for %d events, want %d", len(msgs), n, n/feedChunk)
	}
	var got []Metered
	for _, b := range msgs {
		if len(b) > 256<<10 {
			t.Errorf("a message of %d bytes", len(b))
		}
		m, err := DecodeFeed(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m...)
	}
	t.Logf("%d events in %d messages, the first %d bytes", n, len(msgs), len(msgs[0]))
	if got := toMicros(0.0004); got != 0.001 {
		t.Errorf("a first token after 0.4 µs is sent as %g ms; want it kept above 0", got)
	}
	if len(got) != n {
		t.Fatalf("%d events read back, want %d", len(got), n)
	}
	slices.SortFunc(got, func(a, b Metered) int { return int(a.Usage.InputTokens - b.Usage.InputTokens) })
	for i, m := range got {
		want := usages[i]
		want.Ticket, want.Model, want.EnergyJoules = "", "", 0
		want.TTFTMillis = float64(i) + 0.123 // to the microsecond
		if m.Usage != want || !m.At.Equal(occurred[i]) {
			t.Fatalf("event %d read back as %+v at %s; want %+v at %s", i, m.Usage, m.At, want, occurred[i])
		}
	}
}

func TestDecodeFeedRefusesAMalformedMessage(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`not json`,
		`{"offerings":[{"offering_id":"o","request_id":["r1","r2"],"time_us":[1],"ttft_ms":[1],"duration_ms":[1],"input_tokens":[1],"output_tokens":[1],"status":["ok"]}]}`,
		`{"offerings":[{"offering_id":"","request_id":["r1"],"time_us":[1],"ttft_ms":[1],"duration_ms":[1],"input_tokens":[1],"output_tokens":[1],"status":["ok"]}]}`,
		`{"offerings":[{"offering_id":"o","request_id":["r1"],"time_us":[1],"ttft_ms":[1],"duration_ms":[1],"input_tokens":[1],"output_tokens":[1],"status":["fine"]}]}`,
	} {
		if m, err := DecodeFeed([]byte(body)); err == nil {
			t.Errorf("DecodeFeed(%s) = %+v, want an error", body, m)
		}
	}
}

// TestFeedNeverHoldsUpACommit: with NATS gone, OnCommit returns at once and publishes nothing.
func TestFeedNeverHoldsUpACommit(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t, natsserver.EmbeddedOptions{})
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv.Shutdown()
	srv.WaitForShutdown()
	for nc.IsConnected() {
		time.Sleep(5 * time.Millisecond)
	}
	usages, occurred := make([]usage.Usage, DefaultBatchSize), make([]time.Time, DefaultBatchSize)
	for i := range usages {
		usages[i] = usage.Usage{RequestID: fmt.Sprintf("req_%d", i), OfferingID: "o", Status: usage.StatusOK}
		occurred[i] = time.Now()
	}
	f := NewFeed(nc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	start := time.Now()
	for range 10 {
		f.OnCommit(BatchResult{Stored: len(usages), Usages: usages, Occurred: occurred}, time.Now())
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("10 commits took %s to publish to a NATS that is down", took)
	}
	if n := len(f.slots); n != 0 {
		t.Errorf("%d batches being published to a NATS that is down", n)
	}
	if out := nc.Stats().OutMsgs; out != 0 {
		t.Errorf("%d messages buffered for a NATS that is down", out)
	}
}
