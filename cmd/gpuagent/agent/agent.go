// Package agent is gpuagent, the provider's sidecar: a reverse proxy in front of an OpenAI-compatible inference
// server (vLLM, llama.cpp's server, simbackend) that serves only requests the gateway routed to its offering and
// reports what each one used as a usage event (package usage) on NATS JetStream. cmd/gpuagent runs it alone;
// cmd/gpumarket runs it in process in front of simulated rigs.
//
// The agent listens on no port: the gateway's requests reach it over the NATS connection it opened itself
// (package rigwire, docs/rig-transport.md), so a rig behind a home router or carrier-grade NAT serves as one in a
// data centre does. Run serves them, through Handler, until its context ends, on the same connection as its usage
// events and heartbeats: one connection per rig. The subscription comes back with the connection after a
// reconnect.
//
// # What it serves
//
// POST /v1/chat/completions, /v1/completions, /v1/embeddings and GET /v1/models, each only with a route ticket
// (header X-GPUMarket-Ticket) signed by the platform for this offering and issued at most TicketMaxAge ago;
// anything else is answered 401 in OpenAI's error shape. The ticket stays with the agent: the inference server
// gets the request's id in X-Request-Id instead.
//
// POST /v1/messages (Anthropic Messages) and POST /v1/responses (OpenAI Responses) are served the same way when
// the inference server serves them itself, and answered 404 without calling it otherwise. The agent finds out by
// asking (probe.go): when Run starts and every 10 minutes, one real request of each API for Config.Model, a
// one-token message and a 16-token response, which counts only when it is answered 2xx in the API's own shape with
// the input and output tokens the agent bills from. Heartbeats name what was found (Heartbeat.Native), so that the
// gateway passes those requests through to this rig instead of translating them into chat completions; a change
// is logged and heartbeated at once. The probes are the agent's own and make no usage event. A request of either
// API goes upstream with its body as the client sent it (no stream_options) and its headers (anthropic-version,
// anthropic-beta) but the ticket.
//
// Responses are relayed as they come: a stream's status and headers as soon as the upstream sent them, then its
// frames one by one, flushed after each; a whole response as it is. An upstream error status (a 5xx before the
// first byte, which the gateway fails over on) reaches the client unchanged.
//
// # What it counts
//
// Tokens are the upstream's own count, never the agent's guess: the usage of a whole response, or of a stream's
// usage chunk. On a streaming chat or text completion the agent sets stream_options.include_usage upstream so
// that the chunk comes; when the client had not asked for it, the client does not see it (the usage-only chunk
// is dropped and the usage member taken out of the other chunks, every other byte relayed as it came). When no
// usage arrives (the client went away mid-stream, the stream broke off, or a server ignores include_usage) the
// output is the number of streamed chunks that carried output, one token each as vLLM and llama.cpp stream
// them (a lower bound when a server packs several tokens in a chunk), and the input is 0: the agent has no
// tokenizer, and under-billing a cut-off request is the safe side.
//
// The native APIs count in their own words (native.go). A Messages answer's prompt is its input_tokens plus its
// cache_read_input_tokens and cache_creation_input_tokens (Anthropic counts the cache apart), of which the cache
// reads are cached; its stream gives the input with message_start, and the output, counted so far, with each
// message_delta (the last one counts); an error event fails the request. A Responses answer's input_tokens
// include the cached input_tokens_details.cached_tokens; its stream gives the usage with the event that ends it
// (response.completed, response.incomplete, or response.failed, which fails the request). Without usage, the
// streamed deltas count as for chat, and every figure is bounded as chat's are.
//
// The status is ok when the upstream answered 2xx and the response went to the client whole (its end, the
// [DONE] frame or the last byte, follows the event: see Delivery); canceled when the
// client went away first (the upstream request is cancelled at once, and the event carries the tokens produced
// until then); error when the upstream answered another status or could not be reached (0 tokens), or its
// response broke off (the tokens relayed until then).
//
// The time to first token runs from the request's arrival to the moment the first chunk carrying output was
// flushed to the client (a Messages content_block_delta, a Responses text, refusal, reasoning or function-call
// arguments delta; for a whole response, its first byte); it is 0 when no output token came. The
// duration runs from the arrival to the last byte.
//
// # Energy
//
// The rig's power is divided among the requests in flight, moment by moment: a request's energy is the integral
// over its duration of P(t) / c(t), where c(t) is the number of requests in flight (itself included). The shares
// of all requests add up to the rig's energy while it was busy; idle power is billed to no one.
//
//   - measured: with nvidia-smi on the machine (Config.NvidiaSMI), P is the sum of every GPU's power.draw,
//     sampled every 100 ms by one nvidia-smi process in loop mode and held between samples. A request is measured
//     only when samples arrived throughout it (none more than a second late).
//   - estimated: otherwise P is the catalog's board power of the GPU model (its maximum, so the estimate is an
//     upper bound) times the GPU count.
//
// # Delivery
//
// Every event is in the outbox before the client can learn that its request is over, and removed only when the
// USAGE stream has acknowledged it: a stream's event is written before its [DONE] frame (a Messages or Responses
// stream's, before the event that ends it), a whole response's before its last byte (held back until then: with a
// Content-Length that byte tells the client the response is whole), and any other before the handler returns and
// the server ends the response. A crash can then leave an event
// kept for a request whose client never saw its end, never a request completed for its client without an event.
//
// The outbox is a log in a directory (Config.OutboxDir), which one agent holds at a time: an exclusive flock on
// its file "lock" (holding the agent's process id), taken at New and released at Close or when the process ends;
// a second agent on the directory is refused at New. The log is segment files named "<number, 20 digits>.log", each a
// sequence of records, a record being its kind ('E' an event, 'A' an acknowledgement), its payload's length and
// the payload's CRC-32C (4 bytes each, big-endian), and the payload: an event's id (its length in 2 bytes, then
// the id) and exactly the encoded event that is published; an acknowledgement's id. An event is appended and
// fsynced before add returns, and the fsync is shared: one covers every record written before it began, so that
// the requests that end together wait for one fsync between them, not one each (a rig's disk takes milliseconds
// for one). An acknowledgement is appended without an fsync (lost in a crash, it only means a re-send). A new
// segment is started at 4 MiB and at each start; a segment none of whose events waits any longer is deleted. At
// start-up the segments are read in order, each up to its first record cut short or failing its checksum (the tail
// of a write that add never returned from, cut off), and every event no acknowledgement follows is sent again.
// The files of the earlier format, one file per event ("<unix nanoseconds>-<event id>.json", and a whole
// ".tmp-<event id>" a crash left before its rename), are moved into the log at start-up and deleted.
//
// A background loop publishes the events in the order they were kept, each with its event id as
// Nats-Msg-Id, in windows of 256, at most maxPublishRate events a second, and waits for the stream's
// acknowledgements (a duplicate's too). It starts 20 ms after an event is added or the connection comes back
// (publishLinger: the events of those 20 ms go in one round, apart from the responses on their way), and at
// start-up for what a previous run left; on failure it retries with backoff (from 100 ms, doubling, to 10 s),
// sooner when the connection comes back or an event is added (unless the stream is refusing the rig's events:
// then only the backoff). A re-send is the same bytes with the same id:
// the stream drops it inside its duplicate window and the meter after it. A refusal by the stream (the rig has as
// many events waiting to be metered as the stream holds for one) and a refused credential (the platform shuts a
// rig out for a while after it published faster than its limit) are logged with the rig's subject: see
// docs/usage-stream.md.
//
// The agent connects to NATS with its rig's own credentials (natsserver.RigUser), which let it publish only its
// own usage and heartbeat subjects and receive replies only under its own inbox prefix and heartbeat requests. Every
// HeartbeatInterval it publishes a Heartbeat on heartbeat.<provider_id>.<offering_id>, and one more at once when a
// gateway that has just started asks for it on events.HeartbeatRequestSubject (at most one such extra heartbeat
// per events.HeartbeatRequestGap, however many requests arrive).
package agent

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/hardware"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// Defaults of the optional settings.
const (
	DefaultTicketMaxAge      = 10 * time.Minute
	DefaultHeartbeatInterval = 5 * time.Second
	// shutdownGrace is how long Run lets requests in flight finish once its context ends.
	shutdownGrace = 10 * time.Second
	// finalFlush bounds Run's last attempt to send the outbox before it returns.
	finalFlush = 2 * time.Second
)

// Config is what an agent needs to know.
type Config struct {
	// Upstream is the base URL of the OpenAI-compatible server, without /v1: "http://127.0.0.1:8000".
	Upstream string
	// Model is the offering's listed model, which Preflight checks the upstream lists and the agent names in its
	// probes for the APIs the upstream serves natively (probe.go); empty skips both.
	Model string

	ProviderID string // the provider's id; with OfferingID, a NATS subject token each
	OfferingID string // the offering this rig serves: tickets must name it
	GPUSKU     string // the GPU model, a catalog SKU: its board power drives the energy estimate
	GPUCount   int    // GPUs in the rig
	Capacity   int    // requests the rig serves at once, reported in heartbeats for the gateway

	NATSURL      string // comma-separated nats:// URLs
	NATSUser     string // the rig's NATS credential (events.RigUsername, events.RigPassword); empty for none
	NATSPassword string

	OutboxDir string // where unacknowledged usage events are kept; must survive restarts

	// OfferingKey verifies the offering's route tickets: ticket.OfferingKey of the platform's key for this
	// offering, which the provider portal shows. The agent never holds the platform's key itself.
	OfferingKey  []byte
	TicketMaxAge time.Duration // tickets issued longer ago are refused; DefaultTicketMaxAge when 0

	// NvidiaSMI is the nvidia-smi command that samples the GPUs' power. Empty, or not found, means energy is
	// estimated.
	NvidiaSMI string

	HeartbeatInterval time.Duration // DefaultHeartbeatInterval when 0

	Now        func() time.Time // the clock; time.Now when nil
	NewEventID func() string    // usage event ids; "evt_" and 24 random hex digits when nil
	Log        *slog.Logger     // slog.Default() when nil
}

func (c *Config) validate() error {
	var problems []string
	if _, _, err := events.ParseUsageSubject(events.UsageSubject(c.ProviderID, c.OfferingID)); err != nil {
		problems = append(problems, "provider and offering ids must be 1 to 128 ASCII letters, digits, - and _")
	}
	if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("upstream %q is not an http(s) URL", c.Upstream))
	}
	if _, ok := hardware.GPUBySKU(c.GPUSKU); !ok {
		problems = append(problems, fmt.Sprintf("GPU SKU %q is not in the catalog", c.GPUSKU))
	}
	if c.GPUCount < 1 {
		problems = append(problems, "GPU count must be at least 1")
	}
	if c.Capacity < 1 {
		problems = append(problems, "capacity must be at least 1")
	}
	if c.NATSURL == "" {
		problems = append(problems, "no NATS URL")
	}
	if c.OutboxDir == "" {
		problems = append(problems, "no outbox directory")
	}
	if c.TicketMaxAge < 0 || c.HeartbeatInterval < 0 {
		problems = append(problems, "durations must not be negative")
	}
	if len(problems) > 0 {
		return fmt.Errorf("agent: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Agent is one rig's sidecar. Its handler may serve before Run starts: events then wait in the outbox.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	signer   *ticket.OfferingVerifier
	upstream string
	client   *http.Client
	handler  http.Handler
	meter    *rigMeter
	outbox   *outbox

	nc        *nats.Conn
	js        jetstream.JetStream
	subject   string // usage.<provider>.<offering>
	heartbeat string // heartbeat.<provider>.<offering>
	wake      chan struct{}
	// refusedCredential is set once the server refused the rig's credential, until it connects again.
	refusedCredential atomic.Bool
	beatAsked         chan struct{} // a heartbeat is wanted now: the connection came up, or a gateway asked
	pace              *rate.Limiter // of the usage events published: maxPublishRate
	acked             atomic.Int64
	rounds            atomic.Int64

	// native holds the APIs the upstream was last found to serve natively (nativeAPIs), none until it was
	// probed; probeEvery is how often it is probed again (nativeProbeInterval); probing serialises probes
	// and guards probed, which says whether any probe has finished yet.
	native     atomic.Uint32
	probeEvery time.Duration
	probing    sync.Mutex
	probed     bool

	closeOnce sync.Once
}

// New checks the configuration, opens the outbox and starts connecting to NATS (in the background: Run serves
// once the connection is up).
func New(cfg Config) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.TicketMaxAge = cmp.Or(cfg.TicketMaxAge, DefaultTicketMaxAge)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewEventID == nil {
		cfg.NewEventID = newEventID
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	log := cfg.Log.With("offering", cfg.OfferingID)
	signer, err := ticket.NewOfferingVerifier(cfg.OfferingKey, cfg.OfferingID)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if cfg.NvidiaSMI != "" {
		path, err := exec.LookPath(cfg.NvidiaSMI)
		if err != nil {
			log.Info("no nvidia-smi: energy is estimated from board power", "looked_for", cfg.NvidiaSMI)
		}
		cfg.NvidiaSMI = path
	}
	gpu, _ := hardware.GPUBySKU(cfg.GPUSKU)
	box, err := openOutbox(cfg.OutboxDir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}

	a := &Agent{
		cfg:      cfg,
		log:      log,
		signer:   signer,
		upstream: strings.TrimRight(cfg.Upstream, "/"),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // the inference server is local to the rig
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: max(cfg.Capacity, 2),
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // relay bytes as the server wrote them, and read them
		}},
		meter:      newRigMeter(float64(gpu.BoardPowerW*cfg.GPUCount), cfg.Now),
		outbox:     box,
		subject:    events.UsageSubject(cfg.ProviderID, cfg.OfferingID),
		heartbeat:  events.HeartbeatSubject(cfg.ProviderID, cfg.OfferingID),
		wake:       make(chan struct{}, 1),
		beatAsked:  make(chan struct{}, 1),
		pace:       rate.NewLimiter(maxPublishRate, publishWindow),
		probeEvery: nativeProbeInterval,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", a.serveInference(true, dialectOpenAI))
	mux.HandleFunc("POST /v1/completions", a.serveInference(true, dialectOpenAI))
	mux.HandleFunc("POST /v1/embeddings", a.serveInference(false, dialectOpenAI))
	mux.HandleFunc("POST /v1/messages", a.serveInference(false, dialectMessages))
	mux.HandleFunc("POST /v1/responses", a.serveInference(false, dialectResponses))
	mux.HandleFunc("GET /v1/models", a.serveModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
			fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path))
	})
	a.handler = a.requireTicket(mux)

	if a.nc, a.js, err = a.connect(); err != nil {
		box.unlock()
		return nil, err
	}
	if n := box.pending.Load(); n > 0 {
		log.Info("outbox holds usage events from an earlier run; sending them", "events", n)
	}
	return a, nil
}

// Handler is the proxy, which verifies each request's route ticket: Run serves it over NATS.
func (a *Agent) Handler() http.Handler { return a.handler }

// Run serves the gateway's calls over NATS, sends the outbox, heartbeats and samples power until ctx ends.
// Then it lets requests in flight finish (up to ten seconds), tries once more to send what they left in the
// outbox, and returns.
func (a *Agent) Run(ctx context.Context) error {
	loops, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { a.sendLoop(loops) })
	wg.Go(func() { a.heartbeatLoop(loops) })
	wg.Go(func() { a.probeLoop(loops) })
	if a.cfg.NvidiaSMI != "" {
		wg.Go(func() { a.samplePower(loops) })
	}

	srv, err := rigwire.Serve(ctx, a.nc, a.cfg.ProviderID, a.cfg.OfferingID, a.handler,
		rigwire.Options{Log: a.log})
	if err == nil {
		a.log.Info("gpuagent serving over NATS", "subject", events.RigCallSubject(a.cfg.ProviderID, a.cfg.OfferingID),
			"upstream", a.upstream)
		<-ctx.Done()
		grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		_ = srv.Shutdown(grace)
		cancel()
	}
	stop()
	wg.Wait()

	last, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlush)
	defer cancel()
	if ferr := a.flush(last); ferr != nil && a.outbox.pending.Load() > 0 {
		a.log.Warn("usage events stay in the outbox until the next start", "events", a.outbox.pending.Load(), "error", ferr)
	}
	return err
}

// Close closes the NATS connection and releases the outbox's directory for the next agent. Events not yet
// acknowledged stay in the outbox.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		a.nc.Close()
		a.outbox.unlock()
	})
	return nil
}

// Stats is the agent's state now.
type Stats struct {
	InFlight     int                // inference requests being served
	Outbox       int                // usage events the stream has not acknowledged yet
	Acked        int64              // usage events the stream acknowledged since New
	Rounds       int64              // rounds of publishing that sent any event since New (publishLinger)
	EnergySource usage.EnergySource // how a request served now gets its energy
}

// Stats reports the agent's state.
func (a *Agent) Stats() Stats {
	return Stats{
		InFlight:     a.meter.inFlightNow(),
		Outbox:       int(a.outbox.pending.Load()),
		Acked:        a.acked.Load(),
		Rounds:       a.rounds.Load(),
		EnergySource: a.meter.source(),
	}
}

// report turns a relayed request into its usage event and keeps it in the outbox for the sender.
func (a *Agent) report(t ticketed, x *exchange, start, end time.Time, joules float64, source usage.EnergySource) {
	u := usage.Usage{
		RequestID:    t.claims.RequestID,
		Ticket:       t.raw,
		OfferingID:   a.cfg.OfferingID,
		Model:        eventModel(x.model),
		EnergySource: source,
		Status:       x.status,
	}
	counted := x.counted()
	if counted != nil {
		u.InputTokens, u.OutputTokens = counted.PromptTokens, counted.CompletionTokens
	} else {
		u.OutputTokens = x.contentChunks
	}
	u.InputTokens = min(max(u.InputTokens, 0), usage.MaxTokens)
	u.OutputTokens = min(max(u.OutputTokens, 0), usage.MaxTokens)
	// Cached tokens are a part of the prompt: an engine that counted more of them than prompt tokens is
	// taken at its prompt count, so that the request still bills (the meter refuses the event otherwise).
	u.CachedInputTokens = min(max(cachedTokens(counted, x.timings), 0), u.InputTokens)
	duration := max(end.Sub(start), 0)
	u.DurationMillis = millis(duration)
	if u.OutputTokens > 0 && !x.firstToken.IsZero() {
		u.TTFTMillis = millis(min(max(x.firstToken.Sub(start), 0), duration))
	}
	u.EnergyJoules = min(max(joules, 0), usage.MaxEnergyJoules)

	ev := usage.NewEvent(a.cfg.NewEventID(), a.cfg.ProviderID, a.cfg.OfferingID, end, u)
	if err := usage.Validate(ev, a.subject, end); err != nil {
		// Sent all the same: the meter keeps a refused event with its reason, for someone to look at.
		a.log.Error("usage event breaks the contract", "event", ev.ID, "request", u.RequestID, "error", err)
	}
	raw, err := usage.Encode(ev)
	if err == nil {
		err = a.outbox.add(ev.ID, raw)
	}
	if err != nil {
		a.log.Error("usage event could not be kept: it is lost unless replayed from this line",
			"event", string(raw), "error", err)
		return
	}
	a.log.Debug("request served", "request", u.RequestID, "status", u.Status, "input_tokens", u.InputTokens,
		"cached_input_tokens", u.CachedInputTokens,
		"output_tokens", u.OutputTokens, "ttft_ms", u.TTFTMillis, "duration_ms", u.DurationMillis,
		"energy_j", u.EnergyJoules, "energy_source", u.EnergySource)
	a.notify()
}

// notify wakes the sender without waiting.
func (a *Agent) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// eventModel is the model name an event can carry: 1 to 200 printable characters, else "unknown".
func eventModel(m string) string {
	if n := utf8.RuneCountInString(m); n == 0 || n > usage.MaxModelLength || !utf8.ValidString(m) {
		return unknownModel
	}
	for _, r := range m {
		if !unicode.IsPrint(r) {
			return unknownModel
		}
	}
	return m
}

func newEventID() string { return services.NewTimeOrderedID("evt_", time.Now()) }
