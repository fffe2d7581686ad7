package agent

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

const (
	testProvider = "prov-1"
	testOffering = "off-1"
	testModel    = "test-model"
	// rtx-4090 (450 W) x 4: the power an estimate assumes.
	testBoardW = 450 * 4
)

var (
	ticketKey = []byte("ticket-key-for-tests-0123456789abcdef")
	rigKey    = []byte("rig-password-key-for-tests-0123456789")
)

func TestValidTicketIsServedAndReportedOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})

	resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_plain"),
		`{"model":"test-model","messages":[{"role":"user","content":"Say hello to the meter."}],"max_tokens":7}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var answer struct {
		Usage tokenUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Usage.CompletionTokens != 7 || answer.Usage.PromptTokens == 0 {
		t.Fatalf("upstream usage %+v, want 7 completion tokens and some prompt tokens", answer.Usage)
	}

	evs := r.waitEvents(t, 1)
	ev := evs[0]
	d := ev.event.Data
	if ev.subject != events.UsageSubject("prov-1", "off-1") || ev.msgID != ev.event.ID || !regexp.MustCompile(`^evt_[0-9a-f]{32}$`).MatchString(ev.event.ID) {
		t.Errorf("published on %q with Nats-Msg-Id %q, event id %q", ev.subject, ev.msgID, ev.event.ID)
	}
	if d.RequestID != "req_plain" || d.Ticket != r.lastTicket || d.OfferingID != testOffering || d.Model != testModel {
		t.Errorf("event data %+v: want the ticket's request, the ticket, the offering and the model", d)
	}
	if d.InputTokens != answer.Usage.PromptTokens || d.OutputTokens != answer.Usage.CompletionTokens {
		t.Errorf("event tokens %d in / %d out, upstream said %+v", d.InputTokens, d.OutputTokens, answer.Usage)
	}
	if d.Status != usage.StatusOK {
		t.Errorf("status %q, want ok", d.Status)
	}
	if !(d.TTFTMillis > 0 && d.TTFTMillis <= d.DurationMillis) {
		t.Errorf("ttft %g ms, duration %g ms: want 0 < ttft <= duration", d.TTFTMillis, d.DurationMillis)
	}
	if d.EnergySource != usage.EnergyEstimated || !(d.EnergyJoules > 0) || d.EnergyJoules > testBoardW*d.DurationMillis/1000*1.001 {
		t.Errorf("energy %g J (%s) over %g ms: want estimated, above 0 and at most %d W over the duration",
			d.EnergyJoules, d.EnergySource, d.DurationMillis, testBoardW)
	}
	if err := usage.Validate(ev.event, ev.subject, time.Now()); err != nil {
		t.Errorf("the event breaks the contract: %v", err)
	}
	if _, err := usage.VerifyTicket(ev.event, mustSigner(t), time.Now(), time.Hour); err != nil {
		t.Errorf("the meter would refuse the event's ticket: %v", err)
	}
	r.expectStreamHolds(t, 1)
}

func TestRequestsWithoutAValidTicketAreRefused(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	otherKey, err := ticket.NewSigner([]byte("some-other-platform-key-0123456789abc"))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(s *ticket.Signer, offering string, issued time.Time) string {
		tk, err := s.Sign(ticket.Claims{RequestID: "req_x", AccountID: "acc-1", APIKeyID: "key-1",
			OfferingID: offering, Tier: "standard", IssuedAt: issued})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	now := time.Now()
	for name, tk := range map[string]string{
		"missing":            "",
		"garbage":            "not-a-ticket",
		"another key":        sign(otherKey, testOffering, now),
		"foreign offering":   sign(mustSigner(t), "off-2", now),
		"eleven minutes old": sign(mustSigner(t), testOffering, now.Add(-11*time.Minute)),
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/models"} {
			method, body := http.MethodPost, `{"messages":[{"role":"user","content":"hi"}]}`
			if path == "/v1/models" {
				method, body = http.MethodGet, ""
			}
			resp := r.do(t, method, path, tk, body)
			got := readAll(t, resp)
			var shape struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    string `json:"code"`
				} `json:"error"`
			}
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(got, &shape) != nil || shape.Error.Message == "" || shape.Error.Type == "" {
				t.Errorf("%s ticket, %s %s: %d %s; want 401 in OpenAI's error shape", name, method, path, resp.StatusCode, got)
			}
		}
	}
	if n := r.upstreamCalls.Load(); n != 0 {
		t.Errorf("the inference server got %d requests without valid tickets", n)
	}

	// A valid request afterwards is the only event on the stream.
	readAll(t, r.post(t, "/v1/chat/completions", r.ticket(t, "req_valid"), `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	evs := r.waitEvents(t, 1)
	if evs[0].event.Data.RequestID != "req_valid" {
		t.Errorf("the event is for %q, want req_valid", evs[0].event.Data.RequestID)
	}
	r.expectStreamHolds(t, 1)
}

func TestStreamWithoutIncludeUsageIsRelayedAsUpstreamSendsItAndStillCounted(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	const request = `{"model":"test-model","messages":[{"role":"user","content":"Stream me a story."}],"stream":true,"max_tokens":20}`

	frames := sseFrames(t, r.post(t, "/v1/chat/completions", r.ticket(t, "req_stream"), request))
	// What the upstream sends a client that did not ask for usage, asked directly.
	direct := sseFrames(t, postTo(t, r.upstreamURL+"/v1/chat/completions", "", request))
	if got, want := normalize(frames), normalize(direct); got != want {
		t.Errorf("the client got\n%s\nthe upstream sends\n%s", got, want)
	}
	for _, f := range frames {
		if strings.Contains(f, `"usage"`) {
			t.Errorf("the client got a usage it did not ask for: %s", f)
		}
	}
	if frames[len(frames)-1] != "data: [DONE]\n\n" {
		t.Errorf("last frame %q, want [DONE]", frames[len(frames)-1])
	}

	want := upstreamUsage(t, r.upstreamURL, `{"model":"test-model","messages":[{"role":"user","content":"Stream me a story."}],"max_tokens":20}`)
	d := r.waitEvents(t, 1)[0].event.Data
	if d.InputTokens != want.PromptTokens || d.OutputTokens != want.CompletionTokens || d.Status != usage.StatusOK {
		t.Errorf("event %d in / %d out (%s); the upstream counts %+v", d.InputTokens, d.OutputTokens, d.Status, want)
	}
	if !(d.TTFTMillis > 0 && d.TTFTMillis <= d.DurationMillis) {
		t.Errorf("ttft %g ms, duration %g ms", d.TTFTMillis, d.DurationMillis)
	}
}

func TestStreamWithIncludeUsageShowsTheClientItsUsage(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	frames := sseFrames(t, r.post(t, "/v1/completions", r.ticket(t, "req_usage"),
		`{"model":"test-model","prompt":"Once upon a time","stream":true,"stream_options":{"include_usage":true},"max_tokens":12}`))
	var usage *tokenUsage
	for _, f := range frames {
		payload, ok := strings.CutPrefix(strings.TrimSpace(f), "data: ")
		if !ok || payload == "[DONE]" {
			continue
		}
		var c struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   *tokenUsage       `json:"usage"`
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
			if len(c.Choices) != 0 {
				t.Errorf("usage on a chunk with choices: %s", f)
			}
		} else if !strings.Contains(f, `"usage":null`) {
			t.Errorf(`a chunk without "usage":null, which the client asked for: %s`, f)
		}
	}
	if usage == nil || usage.CompletionTokens != 12 {
		t.Fatalf("client saw usage %+v, want its usage chunk with 12 completion tokens", usage)
	}
	d := r.waitEvents(t, 1)[0].event.Data
	if d.InputTokens != usage.PromptTokens || d.OutputTokens != usage.CompletionTokens {
		t.Errorf("event %d in / %d out; the client saw %+v", d.InputTokens, d.OutputTokens, *usage)
	}
}

func TestClientDisconnectCancelsUpstreamAndReportsPartialOutput(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{profile: slowProfile()})
	heartbeats := r.subscribe(t, events.HeartbeatSubject(testProvider, testOffering))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.agentURL+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"Talk for a long time."}],"stream":true,"max_tokens":500}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(ticket.Header, r.ticket(t, "req_gone"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	seen := 0
	for seen < 5 && sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"`) && !strings.Contains(sc.Text(), `"content":""`) {
			seen++
		}
	}
	if seen < 5 {
		t.Fatalf("the stream ended after %d content frames: %v", seen, sc.Err())
	}
	waitFor(t, "a heartbeat with the request in flight", func() bool {
		var hb Heartbeat
		msg, err := heartbeats.NextMsg(time.Second)
		return err == nil && json.Unmarshal(msg.Data, &hb) == nil && hb.InFlight == 1
	})
	cancel()
	resp.Body.Close()

	d := r.waitEvents(t, 1)[0].event.Data
	if d.Status != usage.StatusCanceled {
		t.Errorf("status %q, want canceled", d.Status)
	}
	if d.OutputTokens < int64(seen) || d.OutputTokens >= 500 || d.InputTokens != 0 {
		t.Errorf("tokens %d in / %d out: want the %d or more streamed before the client left, fewer than 500, and no input count",
			d.InputTokens, d.OutputTokens, seen)
	}
	if d.DurationMillis > 5000 {
		t.Errorf("duration %g ms: the request ran on after the client left", d.DurationMillis)
	}
	waitFor(t, "the upstream request to be cancelled", func() bool { return r.upstream.InFlight() == 0 })
	if st := r.agent.Stats(); st.InFlight != 0 {
		t.Errorf("stats %+v after the request ended", st)
	}
}

func TestUpstreamFailureIsPassedThroughAndReportedAsError(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{failRate: 1})
	resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_fail"),
		`{"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"server_error"`) {
		t.Errorf("status %d %s, want the upstream's 500 as it sent it", resp.StatusCode, body)
	}
	d := r.waitEvents(t, 1)[0].event.Data
	if d.Status != usage.StatusError || d.OutputTokens != 0 || d.InputTokens != 0 || d.TTFTMillis != 0 {
		t.Errorf("event %+v, want status error with nothing produced", d)
	}
}

func TestEmbeddingsAreCountedAndModelsBillNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	models := r.do(t, http.MethodGet, "/v1/models", r.ticket(t, "req_models"), "")
	if body := readAll(t, models); models.StatusCode != http.StatusOK || !strings.Contains(string(body), testModel) {
		t.Errorf("/v1/models: %d %s", models.StatusCode, body)
	}
	resp := r.post(t, "/v1/embeddings", r.ticket(t, "req_embed"), `{"input":["one two three","four five"],"dimensions":8}`)
	var list struct {
		Usage tokenUsage `json:"usage"`
	}
	if err := json.Unmarshal(readAll(t, resp), &list); err != nil || list.Usage.PromptTokens != 5 {
		t.Fatalf("embeddings: %v, usage %+v", err, list.Usage)
	}
	d := r.waitEvents(t, 1)[0].event.Data
	if d.RequestID != "req_embed" || d.InputTokens != 5 || d.OutputTokens != 0 || d.TTFTMillis != 0 || d.Status != usage.StatusOK {
		t.Errorf("event %+v, want req_embed with 5 input tokens, no output and no ttft", d)
	}
	r.expectStreamHolds(t, 1)
}

func TestEventsWaitInTheOutboxWhileNATSIsDownAndAreSentOnceWhenItIsBack(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	r.nats.Shutdown()
	r.nats.WaitForShutdown()

	resp := r.post(t, "/v1/chat/completions", r.ticket(t, "req_offline"), `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("with NATS down: %d %s, want the request served", resp.StatusCode, body)
	}
	waitFor(t, "the event in the outbox", func() bool { return r.agent.Stats().Outbox == 1 })
	events, err := keptInOutbox(r.outboxDir)
	if err != nil || len(events) != 1 {
		t.Fatalf("the outbox keeps %d events (%v), want one", len(events), err)
	}
	kept, err := usage.Decode(events[0])
	if err != nil {
		t.Fatalf("the outbox file is not the event: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // let the sender fail a few times
	if st := r.agent.Stats(); st.Outbox != 1 || st.Acked != 0 {
		t.Fatalf("stats %+v while NATS is down", st)
	}

	r.restartNATS(t)
	waitFor(t, "the outbox to drain", func() bool { st := r.agent.Stats(); return st.Outbox == 0 && st.Acked == 1 })
	evs := r.waitEvents(t, 1)
	if evs[0].event.ID != kept.ID || evs[0].msgID != kept.ID || evs[0].event.Data.RequestID != "req_offline" {
		t.Errorf("the stream holds event %s (msg id %s), want the kept %s", evs[0].event.ID, evs[0].msgID, kept.ID)
	}
	r.expectStreamHolds(t, 1)
	if events, err := keptInOutbox(r.outboxDir); err != nil || len(events) != 0 {
		t.Errorf("the outbox still keeps %d events (%v)", len(events), err)
	}
}

func TestEventsKeptWithinTheLingerArePublishedInOneRound(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	waitFor(t, "the agent's connection", func() bool { return r.agent.nc.IsConnected() })
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`
	// Two requests one after the other: the second's event is kept while the sender still waits
	// out the first's linger, so one round publishes both; a sender that published on every
	// event would need two. On a machine too slow for two requests in half the linger the
	// count is not checked, only that both arrive.
	for attempt := range 5 {
		before := r.agent.Stats()
		start := time.Now()
		for i := range 2 {
			resp := r.post(t, "/v1/chat/completions", r.ticket(t, fmt.Sprintf("req_linger_%d_%d", attempt, i)), body)
			if b := readAll(t, resp); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		}
		took := time.Since(start)
		waitFor(t, "both events acknowledged", func() bool { return r.agent.Stats().Acked == before.Acked+2 })
		rounds := r.agent.Stats().Rounds - before.Rounds
		if took < publishLinger/2 {
			if rounds != 1 {
				t.Fatalf("two events kept %s apart went out in %d rounds, want one", took, rounds)
			}
			r.expectStreamHolds(t, 2*(attempt+1))
			return
		}
		t.Logf("two requests took %s, over half the %s linger: trying again", took, publishLinger)
	}
}

func TestOutboxLeftByAnEarlierRunIsSentAtStart(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{noRun: true}) // an agent that serves but never sends, then stops
	readAll(t, r.post(t, "/v1/chat/completions", r.ticket(t, "req_left"), `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	waitFor(t, "the event in the outbox", func() bool { return r.agent.Stats().Outbox == 1 })
	r.agent.Close()

	if events, err := keptInOutbox(r.outboxDir); len(events) != 1 {
		t.Fatalf("the stopped agent left %d events in its outbox (%v), want one", len(events), err)
	}
	if n := r.streamCount(t); n != 0 {
		t.Fatalf("the stream holds %d events from an agent that never sent", n)
	}

	next := r.startAgent(t, r.outboxDir, false)
	evs := r.waitEvents(t, 1)
	if evs[0].event.Data.RequestID != "req_left" {
		t.Errorf("event for %q, want req_left", evs[0].event.Data.RequestID)
	}
	waitFor(t, "the outbox to drain", func() bool { return next.Stats().Outbox == 0 })
	if n := r.streamCount(t); n != 1 {
		t.Errorf("the stream holds %d events, want 1", n)
	}
}

func TestHeartbeatsReportTheRig(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	sub := r.subscribe(t, events.HeartbeatSubject("prov-1", "off-1"))
	msg, err := sub.NextMsg(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var hb Heartbeat
	if err := json.Unmarshal(msg.Data, &hb); err != nil {
		t.Fatal(err)
	}
	if hb.OfferingID != testOffering || hb.ProviderID != testProvider || hb.InFlight != 0 || hb.Queued != 0 ||
		hb.Capacity != 8 || time.Since(hb.At) > 5*time.Second {
		t.Errorf("heartbeat %s", msg.Data)
	}
	for _, key := range []string{"offering_id", "provider_id", "in_flight", "queued", "capacity", "at"} {
		if !strings.Contains(string(msg.Data), `"`+key+`":`) {
			t.Errorf("heartbeat %s lacks %s", msg.Data, key)
		}
	}
}

func TestEnergyIsMeasuredWhenNvidiaSMIIsThere(t *testing.T) {
	t.Parallel()
	// Two GPUs drawing 150 W and 50 W, printed every 20 ms as nvidia-smi does in loop mode.
	smi := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\nwhile :; do printf '0, 150.00\\n1, 50.00\\n'; sleep 0.02; done\n"
	if err := os.WriteFile(smi, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := setup(t, rigOptions{profile: slowProfile(), nvidiaSMI: smi})
	waitFor(t, "power samples", func() bool { return r.agent.Stats().EnergySource == usage.EnergyMeasured })

	readAll(t, r.post(t, "/v1/chat/completions", r.ticket(t, "req_measured"),
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":10}`))
	d := r.waitEvents(t, 1)[0].event.Data
	seconds := d.DurationMillis / 1000
	if d.EnergySource != usage.EnergyMeasured || d.EnergyJoules < 200*seconds*0.9 || d.EnergyJoules > 200*seconds*1.001 {
		t.Errorf("energy %g J (%s) over %g ms: want about 200 W over the duration, measured", d.EnergyJoules, d.EnergySource, d.DurationMillis)
	}
}

// Run serves the gateway's calls over the agent's own NATS connection: no port is opened. A call without a route
// ticket is refused there as over any other way in.
func TestRunServesOverNATS(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	caller, err := rigwire.NewCaller(r.nc, rigwire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	call := func(tk string) (*http.Response, error) {
		h := http.Header{"Content-Type": {"application/json"}}
		if tk != "" {
			h.Set(ticket.Header, tk)
		}
		return caller.Call(t.Context(), testProvider, testOffering, "/v1/chat/completions", h,
			[]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`))
	}
	var resp *http.Response
	waitFor(t, "the agent to serve over NATS", func() bool {
		resp, err = call(r.ticket(t, "req_nats"))
		return err == nil
	})
	body := string(readAll(t, resp))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("status %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if d := r.waitEvents(t, 1)[0].event.Data; d.RequestID != "req_nats" || d.OutputTokens != 2 || d.Status != usage.StatusOK {
		t.Errorf("event %+v", d)
	}
	resp, err = call("")
	if err != nil {
		t.Fatal(err)
	}
	if body := string(readAll(t, resp)); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid_route_ticket") {
		t.Errorf("a call without a ticket: %d %s", resp.StatusCode, body)
	}
}

// Unit tests of the parts.

func TestWithoutMemberKeepsEveryOtherByte(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"x","choices":[],"usage":null}`, `{"id":"x","choices":[]}`},
		{`{"usage":null,"id":"x"}`, `{"id":"x"}`},
		{`{"usage": null , "id":"x"}`, `{ "id":"x"}`},
		{`{"usage":null}`, `{}`},
		{`{"id":"x", "usage" : {"prompt_tokens":1}, "model":"m"}`, `{"id":"x", "model":"m"}`},
		{`{"id":"x","nested":{"usage":null}}`, `{"id":"x","nested":{"usage":null}}`},
		{`{"id":"\"usage\":null"}`, `{"id":"\"usage\":null"}`},
		{`not json`, `not json`},
	} {
		if got := string(withoutMember([]byte(c.in), "usage")); got != c.want {
			t.Errorf("withoutMember(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestMemberScannerFindsTopLevelUsageAndModelInPieces(t *testing.T) {
	body := `{"id":"x","data":[{"usage":"no","model":"inner"}],"note":"\"usage\":{\"prompt_tokens\":99}",` +
		`"model" : "m-1","usage": {"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
	for _, size := range []int{1, 7, len(body)} {
		var s memberScanner
		for i := 0; i < len(body); i += size {
			_, _ = s.Write([]byte(body[i:min(i+size, len(body))]))
		}
		usage, model := s.result(dialectOpenAI)
		if usage == nil || usage.PromptTokens != 12 || usage.CompletionTokens != 3 || model != "m-1" {
			t.Errorf("pieces of %d: usage %+v, model %q", size, usage, model)
		}
	}
	var none memberScanner
	_, _ = none.Write([]byte(`{"error":{"message":"no"}}`))
	if usage, model := none.result(dialectOpenAI); usage != nil || model != "" {
		t.Errorf("error body: usage %+v, model %q", usage, model)
	}
}

func TestReadInferenceRequestForcesUsageOnlyOnStreams(t *testing.T) {
	for _, c := range []struct {
		in          string
		force       bool
		wantForced  bool
		wantOptions string // stream_options upstream, "" for the body unchanged
	}{
		{`{"model":"m","stream":true}`, true, true, `{"include_usage":true}`},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1}}`, true, true, `{"include_usage":true,"x":1}`},
		{`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true, false, ""},
		{`{"model":"m","stream":false}`, true, false, ""},
		{`{"model":"m","stream":true}`, false, false, ""}, // embeddings take no stream_options
		{`[1,2]`, true, false, ""},
	} {
		req := readInferenceRequest([]byte(c.in), c.force)
		if req.forcedUsage != c.wantForced {
			t.Errorf("%s: forced %v", c.in, req.forcedUsage)
		}
		if c.wantOptions == "" {
			if string(req.body) != c.in {
				t.Errorf("%s: body changed to %s", c.in, req.body)
			}
			continue
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(req.body, &top); err != nil || string(top["stream_options"]) != c.wantOptions || string(top["model"]) != `"m"` {
			t.Errorf("%s: upstream body %s", c.in, req.body)
		}
	}
}

func TestRigMeterSharesPowerAmongRequestsInFlight(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	m := newRigMeter(100, clock) // 100 W
	a := m.enter(now)
	now = now.Add(2 * time.Second) // a alone: 200 J
	b := m.enter(now)
	now = now.Add(2 * time.Second) // a and b: 100 J each
	ea, src := m.leave(a, now)
	now = now.Add(1 * time.Second) // b alone: 100 J
	eb, _ := m.leave(b, now)
	now = now.Add(10 * time.Second) // idle: nobody's
	c := m.enter(now)
	now = now.Add(time.Second)
	ec, _ := m.leave(c, now)
	if ea != 300 || eb != 200 || ec != 100 || src != usage.EnergyEstimated {
		t.Errorf("energies %g, %g, %g J (%s); want 300, 200, 100 estimated", ea, eb, ec, src)
	}

	// Measured: samples keep arriving through d, stop during e.
	d := m.enter(now)
	m.sample(40)
	e := m.enter(now)
	now = now.Add(500 * time.Millisecond)
	m.sample(40)
	now = now.Add(500 * time.Millisecond)
	ed, srcD := m.leave(d, now)
	if srcD != usage.EnergyEstimated {
		t.Errorf("a request started before the first sample is %s", srcD)
	}
	f := m.enter(now)
	now = now.Add(100 * time.Millisecond)
	m.sample(40)
	ef, srcF := m.leave(f, now)
	if srcF != usage.EnergyMeasured || ef < 1.99 || ef > 2.01 {
		t.Errorf("f: %g J %s, want 2 J measured (40 W for 0.1 s, shared with e)", ef, srcF)
	}
	now = now.Add(2 * time.Second) // samples stale
	ee, srcE := m.leave(e, now)
	if srcE != usage.EnergyEstimated || ed <= 0 || ee <= 0 {
		t.Errorf("e: %g J %s after its samples stopped; d: %g J", ee, srcE, ed)
	}
}

func TestDataPayloadFindsTheSingleDataLine(t *testing.T) {
	for _, c := range []struct{ frame, want string }{
		{"data: {\"a\":1}\n\n", `{"a":1}`},
		{"data:{\"a\":1}\r\n\r\n", `{"a":1}`},
		{"event: x\ndata: [DONE]\n\n", "[DONE]"},
		{": comment\n\n", ""},
		{"data: a\ndata: b\n\n", ""},
	} {
		from, to, ok := dataPayload([]byte(c.frame))
		got := ""
		if ok {
			got = c.frame[from:to]
		}
		if got != c.want {
			t.Errorf("dataPayload(%q) = %q, want %q", c.frame, got, c.want)
		}
	}
}

// The test rig: an embedded NATS server with the rig's and the platform's users, the usage stream, a simulated
// inference server and the agent in front of it.

type rigOptions struct {
	profile   simulation.Profile
	failRate  float64
	nvidiaSMI string
	noRun     bool          // serve without Run: events stay in the outbox
	upstream  http.Handler  // answers in place of the simulated inference server
	heartbeat time.Duration // the heartbeat interval; 50 ms when 0
	pending   int64         // the usage stream's per-rig limit; its default when 0
	model     string        // the listed model: the agent probes its upstream for native APIs only with one
	reprobe   time.Duration // how often the agent probes its upstream again; nativeProbeInterval when 0
}

type rig struct {
	opts          rigOptions
	storeDir      string
	port          int
	users         []*server.User
	nats          *server.Server
	js            jetstream.JetStream
	nc            *nats.Conn
	upstream      *simulation.Handler
	upstreamURL   string
	upstreamCalls atomic.Int64
	outboxDir     string
	agent         *Agent
	agentURL      string
	lastTicket    string
	logs          *syncBuffer
}

func setup(t *testing.T, opts rigOptions) *rig {
	t.Helper()
	r := &rig{opts: opts, storeDir: t.TempDir(), outboxDir: t.TempDir(), logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", r.logs)
		}
	})
	r.users = []*server.User{
		natsserver.RigUser(testProvider, testOffering, events.RigPassword(rigKey, testOffering)),
		natsserver.PlatformUser("platform", "platform-secret"),
	}
	r.startNATS(t, 0)
	if _, err := usage.EnsureStreams(t.Context(), r.js, usage.StreamOptions{MaxPendingPerRig: opts.pending}); err != nil {
		t.Fatal(err)
	}

	r.upstream = simulation.NewHandler(simulation.Options{Profile: opts.profile, Model: testModel, FailRate: opts.failRate, Seed: 7})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.upstreamCalls.Add(1)
		if opts.upstream != nil {
			opts.upstream.ServeHTTP(w, req)
			return
		}
		r.upstream.ServeHTTP(w, req)
	}))
	t.Cleanup(up.Close)
	r.upstreamURL = up.URL

	r.agent = r.startAgent(t, r.outboxDir, opts.noRun)
	srv := httptest.NewServer(r.agent.Handler())
	t.Cleanup(srv.Close)
	r.agentURL = srv.URL
	return r
}

// startAgent starts an agent on the outbox, running (unless noRun) until the test ends.
func (r *rig) startAgent(t *testing.T, outboxDir string, noRun bool) *Agent {
	t.Helper()
	a, err := New(Config{
		Upstream:          r.upstreamURL,
		Model:             r.opts.model,
		ProviderID:        testProvider,
		OfferingID:        testOffering,
		GPUSKU:            "rtx-4090",
		GPUCount:          4,
		Capacity:          8,
		NATSURL:           fmt.Sprintf("nats://127.0.0.1:%d", r.port),
		NATSUser:          events.RigUsername(testOffering),
		NATSPassword:      events.RigPassword(rigKey, testOffering),
		OutboxDir:         outboxDir,
		OfferingKey:       ticket.OfferingKey(ticketKey, testOffering),
		NvidiaSMI:         r.opts.nvidiaSMI,
		HeartbeatInterval: cmp.Or(r.opts.heartbeat, 50*time.Millisecond),
		Log:               slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("agent", t.Name()),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.probeEvery = cmp.Or(r.opts.reprobe, a.probeEvery)
	if noRun {
		return a
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a
}

func (r *rig) startNATS(t *testing.T, port int) {
	t.Helper()
	s, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{
		Port:     port,
		StoreDir: r.storeDir,
		Users:    r.users,
		Log:      slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	r.nats = s
	r.port = s.Addr().(*net.TCPAddr).Port
	if port != 0 && r.port != port {
		t.Fatalf("NATS came back on port %d, not %d", r.port, port)
	}
	nc, js, err := events.Connect(t.Context(), fmt.Sprintf("nats://platform:platform-secret@127.0.0.1:%d", r.port), "platform",
		slog.New(slog.NewTextHandler(r.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r.nc, r.js = nc, js
}

// restartNATS starts the server again on the same port and store.
func (r *rig) restartNATS(t *testing.T) {
	t.Helper()
	r.startNATS(t, r.port)
}

func (r *rig) ticket(t *testing.T, requestID string) string {
	t.Helper()
	tk, err := mustSigner(t).Sign(ticket.Claims{RequestID: requestID, AccountID: "acc-1", APIKeyID: "key-1",
		OfferingID: testOffering, Tier: "standard", IssuedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	r.lastTicket = tk
	return tk
}

func (r *rig) post(t *testing.T, path, tk, body string) *http.Response {
	t.Helper()
	return r.do(t, http.MethodPost, path, tk, body)
}

func (r *rig) do(t *testing.T, method, path, tk, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, r.agentURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tk != "" {
		req.Header.Set(ticket.Header, tk)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (r *rig) subscribe(t *testing.T, subject string) *nats.Subscription {
	t.Helper()
	sub, err := r.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

type received struct {
	subject string
	msgID   string
	event   usage.UsageEvent
}

// waitEvents waits until the usage stream holds n events and returns them.
func (r *rig) waitEvents(t *testing.T, n int) []received {
	t.Helper()
	var stream jetstream.Stream
	waitFor(t, fmt.Sprintf("%d events on the stream", n), func() bool {
		s, err := r.js.Stream(t.Context(), events.UsageStream)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		stream = s
		return err == nil && info.State.Msgs >= uint64(n)
	})
	var out []received
	for seq := uint64(1); len(out) < n; seq++ {
		msg, err := stream.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := usage.Decode(msg.Data)
		if err != nil {
			t.Fatalf("message %d is not a usage event: %v\n%s", seq, err, msg.Data)
		}
		out = append(out, received{subject: msg.Subject, msgID: msg.Header.Get(usage.HeaderMsgID), event: ev})
	}
	return out
}

// expectStreamHolds checks, once the agent's outbox is empty, that the stream holds exactly n events.
func (r *rig) expectStreamHolds(t *testing.T, n int) {
	t.Helper()
	waitFor(t, "the outbox to drain", func() bool { return r.agent.Stats().Outbox == 0 })
	if got := r.streamCount(t); got != n {
		t.Errorf("the stream holds %d events, want exactly %d", got, n)
	}
}

func (r *rig) streamCount(t *testing.T) int {
	t.Helper()
	s, err := r.js.Stream(t.Context(), events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Msgs)
}

// slowProfile streams a token every 20 ms after a 5 ms first token, whatever the load.
func slowProfile() simulation.Profile {
	return simulation.Profile{Model: testModel, GPU: "rtx-4090", Count: 4, Levels: []simulation.Level{{
		QPS: 1, ReqS: 1, TTFTP50Ms: 5, TTFTP90Ms: 5, TTFTP99Ms: 5, TPOTP50Ms: 20, TPOTP99Ms: 20,
		TotalTPS: 50, MeanInputTokens: 10, MeanOutputTokens: 50,
	}}}
}

func mustSigner(t *testing.T) *ticket.Signer {
	t.Helper()
	s, err := ticket.NewSigner(ticketKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func postTo(t *testing.T, url, tk, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tk != "" {
		req.Header.Set(ticket.Header, tk)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// upstreamUsage asks the inference server directly for the usage of a non-streaming request.
func upstreamUsage(t *testing.T, baseURL, body string) tokenUsage {
	t.Helper()
	var out struct {
		Usage tokenUsage `json:"usage"`
	}
	if err := json.Unmarshal(readAll(t, postTo(t, baseURL+"/v1/chat/completions", "", body)), &out); err != nil {
		t.Fatal(err)
	}
	return out.Usage
}

// sseFrames reads a whole event stream into its frames, each with its blank line.
func sseFrames(t *testing.T, resp *http.Response) []string {
	t.Helper()
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var frames []string
	for f := range strings.SplitAfterSeq(string(body), "\n\n") {
		if f != "" {
			frames = append(frames, f)
		}
	}
	return frames
}

var volatile = regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)

// normalize joins frames with the fields that differ between two runs of one request blanked.
func normalize(frames []string) string {
	return volatile.ReplaceAllString(strings.Join(frames, ""), `"$1":_`)
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
