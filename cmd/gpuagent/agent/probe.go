package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The APIs an upstream may serve natively besides chat completions: the values of Heartbeat.Native.
const (
	NativeMessages  = "messages"  // Anthropic Messages: the upstream serves POST /v1/messages
	NativeResponses = "responses" // OpenAI Responses: the upstream serves POST /v1/responses
)

const (
	// nativeProbeInterval is how often the agent probes its upstream again: an engine restarted as another
	// version, or another engine, may serve another set of APIs.
	nativeProbeInterval = 10 * time.Minute
	// nativeProbeTimeout bounds each probe: a server that serves the API answers a one-token request within it.
	nativeProbeTimeout = 5 * time.Second
	// maxProbeAnswer bounds what the agent reads of a probe's answer.
	maxProbeAnswer = 1 << 20
)

// nativeAPI is one API an upstream may serve natively, and the probe that finds out whether it does.
type nativeAPI struct {
	dialect dialect
	name    string // in Heartbeat.Native
	title   string // in the log
	path    string
	header  http.Header
	// request is the probe's body: the smallest real request of the API for the model.
	request func(model string) any
	// answered says an answer is the API's: a Messages message, a Responses response.
	answered func(probeAnswer) bool
}

// probeAnswer is what a probe reads of an answer: its kind, and the usage figures the agent bills from.
type probeAnswer struct {
	Type   string `json:"type"`   // Messages: "message"
	Object string `json:"object"` // Responses: "response"
	Usage  *struct {
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
	} `json:"usage"`
}

// nativeAPIList are the APIs the agent probes for, in the order of their names.
var nativeAPIList = []nativeAPI{
	{
		dialect: dialectMessages, name: NativeMessages, title: "Anthropic Messages", path: "/v1/messages",
		header: http.Header{"Anthropic-Version": {"2023-06-01"}},
		request: func(model string) any {
			type message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			}
			return struct {
				Model     string    `json:"model"`
				MaxTokens int       `json:"max_tokens"`
				Messages  []message `json:"messages"`
			}{model, 1, []message{{"user", "ping"}}}
		},
		answered: func(a probeAnswer) bool { return a.Type == "message" },
	},
	{
		dialect: dialectResponses, name: NativeResponses, title: "OpenAI Responses", path: "/v1/responses",
		request: func(model string) any {
			// 16 output tokens: the least some servers accept.
			return struct {
				Model           string `json:"model"`
				Input           string `json:"input"`
				MaxOutputTokens int    `json:"max_output_tokens"`
				Store           bool   `json:"store"`
			}{model, "ping", 16, false}
		},
		answered: func(a probeAnswer) bool { return a.Object == "response" },
	},
}

// nativeAPIs is a set of the APIs in nativeAPIList, one bit per dialect.
type nativeAPIs uint32

func (n nativeAPIs) has(d dialect) bool { return n&(1<<d) != 0 }

// names are the set's names, sorted as nativeAPIList is; nil for none.
func (n nativeAPIs) names() []string {
	var out []string
	for _, api := range nativeAPIList {
		if n.has(api.dialect) {
			out = append(out, api.name)
		}
	}
	return out
}

// describe says in words what the set means for the platform's clients.
func (n nativeAPIs) describe() string {
	var served, translated []string
	for _, api := range nativeAPIList {
		if n.has(api.dialect) {
			served = append(served, api.title)
		} else {
			translated = append(translated, api.title)
		}
	}
	switch {
	case len(translated) == 0:
		return strings.Join(served, ", ")
	case len(served) == 0:
		return "neither " + strings.Join(translated, " nor ") + ": the platform translates them to chat completions"
	}
	return strings.Join(served, ", ") + "; the platform translates " + strings.Join(translated, ", ") +
		" to chat completions"
}

// nativeNow is what the upstream was last found to serve natively.
func (a *Agent) nativeNow() nativeAPIs { return nativeAPIs(a.native.Load()) }

// probeLoop probes the upstream at once and then every probeEvery until ctx ends. Without a listed model there
// is nothing to ask for, and the upstream is not probed: it serves chat completions only, as far as the
// platform knows.
func (a *Agent) probeLoop(ctx context.Context) {
	if a.cfg.Model == "" {
		a.log.Debug("no listed model: the upstream is not probed for the APIs it serves natively")
		return
	}
	t := time.NewTicker(a.probeEvery)
	defer t.Stop()
	for {
		a.probeNative(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probeNative probes the upstream for each native API at once and keeps what it found. It logs the finding the
// first time and whenever it changes, with why each API not served failed its probe; a change goes out in a
// heartbeat at once.
func (a *Agent) probeNative(ctx context.Context) {
	a.probing.Lock()
	defer a.probing.Unlock()
	whyNot := make([]string, len(nativeAPIList))
	var wg sync.WaitGroup
	for i, api := range nativeAPIList {
		wg.Go(func() { whyNot[i] = a.probe(ctx, api) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the agent is stopping: what the probes met says nothing of the upstream
	}
	var found nativeAPIs
	var attrs []any
	for i, api := range nativeAPIList {
		if whyNot[i] == "" {
			found |= 1 << api.dialect
		} else {
			attrs = append(attrs, api.name, whyNot[i])
		}
	}
	was := nativeAPIs(a.native.Swap(uint32(found)))
	switch {
	case !a.probed:
		a.log.Info("upstream serves natively: "+found.describe(), attrs...)
	case was != found:
		a.log.Info("what the upstream serves natively changed: now "+found.describe(), attrs...)
	}
	a.probed = true
	if was != found {
		a.askBeat()
	}
}

// probe sends the API's probe upstream for the listed model and returns why the upstream does not serve the API
// natively, "" when it does: it answered 2xx with a JSON object of the API's kind whose usage has the input and
// output tokens the agent bills from. The probe is the agent's own request: it is in the rig's load while it
// runs, as any request is, but its energy is no one's and it makes no usage event. It carries no credential,
// as no request the agent relays does: the upstream is the rig's own server, and the agent holds none for it.
func (a *Agent) probe(ctx context.Context, api nativeAPI) (whyNot string) {
	ctx, cancel := context.WithTimeout(ctx, nativeProbeTimeout)
	defer cancel()
	body, err := json.Marshal(api.request(a.cfg.Model))
	if err != nil {
		return err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.upstream+api.path, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header = api.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")

	mark := a.meter.enter(a.cfg.Now())
	defer func() { _, _ = a.meter.leave(mark, a.cfg.Now()) }()
	resp, err := a.client.Do(req)
	if err != nil {
		return "no answer: " + reason(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "answered " + resp.Status
	}
	var answer probeAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxProbeAnswer)).Decode(&answer); err != nil {
		return "answered with no JSON object: " + err.Error()
	}
	if !api.answered(answer) {
		return "answered with another API's object"
	}
	if answer.Usage == nil || answer.Usage.InputTokens == nil || answer.Usage.OutputTokens == nil {
		return "answered without input_tokens and output_tokens in its usage"
	}
	return ""
}
