package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// TestGatewayIntegrity repeats, against the whole platform, what a dishonest provider tried: a rig that redirects
// the gateway somewhere else, and answers that are not what an OpenAI server sends. Each attack fails in the
// way docs/metering-integrity.md says: it costs the customer nothing, or no more than the gateway bounded.
func TestGatewayIntegrity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole platform with simulated rigs")
	}
	b := setupGateway(t)
	t.Run("a rig that redirects reaches nothing behind it", b.testRedirectingAgent)
	t.Run("an answer that is not an OpenAI response is not relayed", b.testNotAnOpenAIAnswer)
	t.Run("the gateway's record holds the bounds and what it relayed", b.testRecordedBounds)
	t.Run("an ask raised after serving pays the ask agreed at routing", b.testAskRaisedAfterServing)
	t.Run("ten million tokens reported for a one-token request bill one", b.testTenMillionTokensForOne)
	t.Run("an attempt the rig answered 503 bills nothing", b.testFailedAttemptReported)
	t.Run("usage the gateway never saw bills no more than it relayed", b.testUsageTheGatewayNeverSaw)
	t.Run("a lying upstream behind the stock agent bills what the ticket bounded", b.testLyingUpstreamBehindTheStockAgent)
	t.Run("a burst of held, inflated events from four rigs stalls nothing", b.testBurstOfHeldEvents)
}

// probe is an HTTP server standing for what a rig could point the gateway at, or a rig's own answer (its
// Config.Handler, served over NATS by a fake rig): it counts what reaches it and whether a route ticket came
// along.
type probe struct {
	*httptest.Server
	mu      sync.Mutex
	paths   []string
	tickets int
}

func newProbe(t *testing.T, h http.HandlerFunc) *probe {
	p := &probe{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.paths = append(p.paths, r.URL.RequestURI())
		if r.Header.Get(ticket.Header) != "" {
			p.tickets++
		}
		p.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *probe) seen() (paths []string, tickets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.paths...), p.tickets
}

// pinned asks for a chat completion on one offering, as a customer pinning it would.
func pinned(o catalog.Offering, maxTokens int64) (openai.ChatCompletionNewParams, option.RequestOption) {
	return chatParams(o.Model, maxTokens), option.WithJSONSet("gpumarket", map[string]any{"offering": o.ID})
}

func (b *gatewayBundle) testRedirectingAgent(t *testing.T) {
	o, rig := b.listFake(t, "gw-redirect", 100_000)
	dev, _, secret := b.developer(t, "redirect", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)

	// What the redirect points at: the platform's own metrics, and an internal service standing in for it here,
	// whose every hit would be a leak.
	internal := newProbe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"secret": "internal"}`)
	})
	for _, target := range []string{b.p.URL() + "/metrics", internal.URL + "/v1/chat/completions"} {
		redirector := newProbe(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusTemporaryRedirect)
		})
		rig.use(redirector.Config.Handler)
		params, pin := pinned(o, 4)
		var res *http.Response
		_, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin, option.WithResponseInto(&res))
		e := apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_capacity")
		if strings.Contains(e.RawJSON(), "# HELP") || strings.Contains(e.RawJSON(), "internal") {
			t.Fatalf("the redirect target's answer reached the customer: %s", e.RawJSON())
		}
		if paths, tickets := redirector.seen(); len(paths) != 1 || paths[0] != "/v1/chat/completions" || tickets != 1 {
			t.Fatalf("the redirector saw %v with %d tickets, want one request to /v1/chat/completions", paths, tickets)
		}
	}
	if paths, tickets := internal.seen(); len(paths) != 0 || tickets != 0 {
		t.Fatalf("the internal service was reached through a redirect: %v, %d tickets", paths, tickets)
	}
	// The log's own loop may be writing a batch as the test flushes: the records are awaited, not read once.
	var recorded int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.flushRequestLog(t)
		if err := b.p.pool.QueryRow(b.ctx, `SELECT count(*) FROM gateway_requests
			WHERE account_id = $1 AND status = 'failed_over' AND http_status = 307`, dev.AccountID).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		if recorded >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if recorded != 2 {
		t.Fatalf("%d redirected attempts recorded as failed, want 2", recorded)
	}
	if got := b.balance(t, dev.AccountID); got != start {
		t.Fatalf("balance %s, want %s: a redirected attempt costs nothing", got, start)
	}
}

func (b *gatewayBundle) testNotAnOpenAIAnswer(t *testing.T) {
	o, rig := b.listFake(t, "gw-answers", 100_000)
	dev, _, secret := b.developer(t, "answers", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)
	var answered atomic.Int32
	for name, h := range map[string]http.HandlerFunc{
		"an HTML page": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>login</html>")
		},
		"plain text metrics": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = io.WriteString(w, "# HELP go_goroutines\n")
		},
		"an error page that is not JSON": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<html>not found</html>")
		},
	} {
		fake := newProbe(t, func(w http.ResponseWriter, r *http.Request) { answered.Add(1); h(w, r) })
		rig.use(fake.Config.Handler)
		params, pin := pinned(o, 4)
		_, err := b.client(secret).Chat.Completions.New(b.ctx, params, pin)
		e := apiError(t, err, http.StatusServiceUnavailable, "server_error", "no_capacity")
		if strings.Contains(e.RawJSON(), "html") || strings.Contains(e.RawJSON(), "HELP") {
			t.Fatalf("%s reached the customer: %s", name, e.RawJSON())
		}
	}
	if answered.Load() != 3 {
		t.Fatalf("the fake rigs answered %d requests, want 3", answered.Load())
	}
	if got := b.balance(t, dev.AccountID); got != start {
		t.Fatalf("balance %s, want %s", got, start)
	}
}

func (b *gatewayBundle) testRecordedBounds(t *testing.T) {
	o := b.list(t, rigSpec{model: "gw-bounds", ask: 100_000, p99: 300})
	_, _, secret := b.developer(t, "bounds", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	client := b.client(secret)

	var res *http.Response
	stream := client.Chat.Completions.NewStreaming(b.ctx, chatParams(o.Model, 7), option.WithResponseInto(&res))
	var text strings.Builder
	chunks := 0
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			text.WriteString(c.Choices[0].Delta.Content)
			chunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	streamID, _, _ := headersOf(t, res)

	// The body as read: a whole answer whose carbon is estimated goes out chunked, with no Content-Length, for
	// its trailer (docs/planner-and-carbon-routing.md).
	var whole []byte
	if _, err := client.Chat.Completions.New(b.ctx, chatParams(o.Model, 5), option.WithResponseInto(&res),
		option.WithResponseBodyInto(&whole)); err != nil {
		t.Fatal(err)
	}
	wholeID, _, _ := headersOf(t, res)

	b.awaitRecords(t, streamID, wholeID)
	type record struct {
		inputBytes, maxIn, maxOut, outBytes, outChunks int64
		streamed                                       bool
	}
	read := func(id string) record {
		var r record
		if err := b.p.pool.QueryRow(b.ctx, `SELECT input_bytes, max_input_tokens, max_output_tokens, relayed_output_bytes,
			relayed_output_chunks, streamed FROM gateway_requests WHERE request_id = $1`, id).
			Scan(&r.inputBytes, &r.maxIn, &r.maxOut, &r.outBytes, &r.outChunks, &r.streamed); err != nil {
			t.Fatal(err)
		}
		return r
	}
	s := read(streamID)
	if !s.streamed || s.maxOut != 7 || s.maxIn != s.inputBytes+512 || s.inputBytes <= 0 {
		t.Fatalf("stream recorded as %+v, want the bound 7 and the input bound 512 over the body", s)
	}
	if s.outBytes != int64(text.Len()) || s.outChunks != int64(chunks) {
		t.Fatalf("stream relayed %d bytes in %d chunks; the record says %d in %d", text.Len(), chunks, s.outBytes, s.outChunks)
	}
	w := read(wholeID)
	if w.streamed || w.maxOut != 5 || w.outBytes != int64(len(whole)) || w.outBytes <= 0 || w.outChunks != 0 {
		t.Fatalf("whole answer of %d bytes recorded as %+v", len(whole), w)
	}
}
