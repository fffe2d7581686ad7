// Package load drives an OpenAI-compatible endpoint the way the public benchmark did (vLLM's
// benchmark_serving, behind "Idle Consumer GPUs as a Complement to Enterprise Hardware for LLM
// Inference", A. R. de Almeida, AIBC 2025): N requests whose arrivals form a Poisson process at
// a rate, each measured at the client for its time to first token, time per output token and
// end-to-end latency, summed up as percentiles, throughput and the cost per million tokens at an
// hourly price. cmd/loadgen is its command line; benchmarks call Run directly.
//
// # Method
//
// The arrival schedule is computed before the first request: the first at zero, then gaps drawn
// from the exponential distribution of mean 1/rate, as benchmark_serving draws them; a rate of
// zero or infinity releases every request at once. One goroutine keeps to the schedule with a
// single timer and hands each due request to a pool of workers that grows to the concurrency
// the endpoint needs, or to the cap when there is one. Request bodies are built before the run,
// connections are kept alive and reused, and every time is read from the monotonic clock.
//
// A request succeeds when it is answered 200 and, when streamed, sends at least one content
// chunk and the closing [DONE]. Its time to first token runs from sending it to its first
// non-empty content chunk; its time per output token, as vLLM defines it, is the time from the
// first content chunk to the last divided by its output tokens minus one; its latency runs to
// the end of the response ([DONE] in a stream). Token counts come from the usage the endpoint
// reports (streams ask for it with stream_options.include_usage); a stream without usage
// counts its content chunks as output tokens and is reported as such.
//
// A client can fall behind its schedule when it is saturated, or when a concurrency cap holds
// arrivals back: each request records how late it was sent, and the result carries the
// achieved sending rate and that lag, so that a run limited by the client is visible as one.
//
// # Through the platform
//
// Pointed at the platform's gateway with an API key and an offering (Options.Offering), a run
// measures one listing as a customer reaches it: every request is pinned to the offering, an
// answer that does not say it came from there (X-GPUMarket-Offering) is a failure of its own
// kind and in no figure, and the tokens are priced at what the platform's catalog publishes for
// the offering's tier (platform.go). The result names the method (Method), the offering and
// every parameter, so that a provider can attach it to the listing.
package load

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Endpoint is the API a run calls.
type Endpoint string

const (
	EndpointChat        Endpoint = "chat"        // POST <URL>/chat/completions with one user message
	EndpointCompletions Endpoint = "completions" // POST <URL>/completions with one prompt
)

// Options configure a run.
type Options struct {
	URL          string         // the API's base URL, e.g. http://127.0.0.1:8000/v1
	APIKey       string         // sent as a bearer token when set
	Model        string         // when empty, the first model GET <URL>/models lists
	Endpoint     Endpoint       // EndpointChat when empty
	Rate         float64        // mean arrivals per second; 0 or +Inf sends every request at once
	Requests     int            // how many requests to send, at least 1
	Concurrency  int            // most requests in flight at once; 0 for no cap
	MaxTokens    int            // max_tokens of each request; 0 leaves it to the endpoint
	PromptTokens int            // length of each synthetic prompt in tokens, about: common words, one token each
	Prompts      []string       // prompts to send in turn instead of synthetic ones
	Stream       bool           // stream responses, which measures TTFT and TPOT; else latency only
	USDPerHour   float64        // the hourly price of what serves the endpoint, for the cost per token
	Header       http.Header    // added to every request, e.g. X-GPUMarket-Tier: batch
	Timeout      time.Duration  // bounds each request; 0 for no bound
	Seed         uint64         // seeds the arrival schedule and the synthetic prompts
	OnProgress   func(Progress) // when set, called about ten times a second and once at the end
	// Offering pins every request to one offering of the gateway (the body option
	// "gpumarket": {"offering": ...}); each answer must then say it came from there
	// (X-GPUMarket-Offering), and the run prices its tokens at the price the platform's catalog
	// publishes for the offering (platform.go).
	Offering string
}

// Progress is how far a run has come.
type Progress struct {
	Requests  int // asked for
	Sent      int
	Completed int // answered successfully
	Failed    int
	Elapsed   time.Duration
}

// Validate reports what is wrong with the options, if anything.
func (o Options) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("load: name the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
	case !validURL(o.URL):
		return fmt.Errorf("load: URL %q is not an http:// or https:// address", o.URL)
	case o.Endpoint != "" && o.Endpoint != EndpointChat && o.Endpoint != EndpointCompletions:
		return fmt.Errorf("load: endpoint %q is neither chat nor completions", o.Endpoint)
	case !(o.Rate >= 0):
		return fmt.Errorf("load: rate %g is not a number of requests per second", o.Rate)
	case o.Requests < 1:
		return errors.New("load: send at least one request")
	case o.Concurrency < 0:
		return errors.New("load: the concurrency cap cannot be negative (0 means none)")
	case o.MaxTokens < 0 || o.PromptTokens < 0:
		return errors.New("load: token counts cannot be negative")
	case !(o.USDPerHour >= 0) || math.IsInf(o.USDPerHour, 0):
		return fmt.Errorf("load: price %g per hour is not an amount of dollars", o.USDPerHour)
	case o.Timeout < 0:
		return errors.New("load: the timeout cannot be negative (0 means none)")
	case len(o.Offering) > 100 || strings.ContainsAny(o.Offering, " \t\r\n\"/"):
		return fmt.Errorf("load: %q is not an offering id; the catalog shows each offering's", o.Offering)
	}
	return nil
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// allAtOnce reports whether the rate releases every request at once.
func (o Options) allAtOnce() bool { return o.Rate == 0 || math.IsInf(o.Rate, 1) }

// Run sends the requests on their schedule and measures them. It returns an error, with no
// result, when the options are invalid or no model can be found. When the context ends first,
// it stops sending, abandons the requests in flight (they count as failed, "canceled") and
// returns the result so far with the context's error.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	o.Endpoint = cmp.Or(o.Endpoint, EndpointChat)
	idle := cmp.Or(o.Concurrency, o.Requests)
	transport := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		// Compression would spend the client's CPU on small bodies and is not what SDKs measure.
		DisableCompression: true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}

	header := http.Header{
		"Content-Type": {"application/json"},
		"User-Agent":   {"gpumarket-loadgen"},
	}
	if o.APIKey != "" {
		header.Set("Authorization", "Bearer "+o.APIKey)
	}
	for k, vs := range o.Header {
		header[http.CanonicalHeaderKey(k)] = vs
	}
	base := strings.TrimSuffix(o.URL, "/")
	var listed *listedOffering
	var unlisted string
	if o.Offering != "" {
		var err error
		if listed, err = catalogOffering(ctx, client, base, o.Offering); err != nil && o.Model == "" {
			return Result{}, fmt.Errorf("%w; name the model with -model", err)
		} else if err != nil {
			unlisted = err.Error()
		}
		if listed != nil && o.Model == "" {
			o.Model = listed.Model
		}
	}
	if o.Model == "" {
		m, err := firstModel(ctx, client, base, header)
		if err != nil {
			return Result{}, err
		}
		o.Model = m
	}
	bodies, err := requestBodies(o)
	if err != nil {
		return Result{}, err
	}

	path := "/chat/completions"
	if o.Endpoint == EndpointCompletions {
		path = "/completions"
	}
	r := &runner{
		opts:     o,
		url:      base + path,
		client:   client,
		header:   header,
		bodies:   bodies,
		schedule: poissonSchedule(o.Requests, o.Rate, o.Seed),
		samples:  make([]sample, o.Requests),
		failures: map[string]*Failure{},
		listed:   listed,
		unlisted: unlisted,
	}
	startedAt := time.Now()
	r.start = startedAt
	stopProgress := r.reportProgress()
	r.dispatch(ctx)
	duration := time.Since(r.start)
	stopProgress()
	return r.result(startedAt, duration), ctx.Err()
}

// runner is one run in progress. Each sample is written by the one worker that sends its
// request and read only after every worker has finished.
type runner struct {
	opts     Options
	url      string
	client   *http.Client
	header   http.Header // shared by every request and never modified: http.Client does not write it
	bodies   [][]byte
	schedule []time.Duration
	start    time.Time
	samples  []sample

	sent, completed, failed atomic.Int64
	inFlight, maxInFlight   atomic.Int64

	mu       sync.Mutex
	failures map[string]*Failure // by kind

	// listed is the pinned offering as the catalog publishes it; nil without a pin or when the
	// catalog could not be read.
	listed   *listedOffering
	unlisted string // why the catalog could not be read, when it could not
}

// dispatch keeps to the schedule: one timer, and a pool of workers that grows whenever a request
// is due and no worker is free, up to the concurrency cap. At the cap, a due request waits for a
// worker, and its lag shows it.
func (r *runner) dispatch(ctx context.Context) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	workers := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
send:
	for i, due := range r.schedule {
		if wait := due - time.Since(r.start); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break send
			}
		} else if ctx.Err() != nil {
			break
		}
		select {
		case jobs <- i:
			continue
		default:
		}
		if r.opts.Concurrency == 0 || workers < r.opts.Concurrency {
			workers++
			wg.Go(func() {
				w := newWorker(r)
				w.do(ctx, i)
				for j := range jobs {
					w.do(ctx, j)
				}
			})
			continue
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
}

// reportProgress calls OnProgress every 100 ms until the returned function is called, which
// reports once more and returns after the last report.
func (r *runner) reportProgress() (stop func()) {
	if r.opts.OnProgress == nil {
		return func() {}
	}
	report := func() {
		r.opts.OnProgress(Progress{
			Requests:  r.opts.Requests,
			Sent:      int(r.sent.Load()),
			Completed: int(r.completed.Load()),
			Failed:    int(r.failed.Load()),
			Elapsed:   time.Since(r.start),
		})
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report()
			case <-done:
				report()
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// firstModel asks the endpoint which models it serves and takes the first.
func firstModel(ctx context.Context, client *http.Client, base string, header http.Header) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return "", fmt.Errorf("load: list models: %w", err)
	}
	req.Header = header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("load: list models to choose one (or name it): %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("load: GET %s/models answered %s; name the model", base, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("load: GET %s/models: %w", base, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("load: GET %s/models lists no model; name one", base)
	}
	return list.Data[0].ID, nil
}
