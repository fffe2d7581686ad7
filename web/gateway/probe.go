package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// Probes (docs/tiers-and-asks.md, "Probes"; docs/listing-states.md). An offering demoted by its measured P99 is routed only in a worse
// tier, whose traffic may bring it no streamed request: without one its window never shows that it recovered.
// So, every routing.ProbeEvery, the gateway sends each offering routing names (routing.Router.ProbeTargets) a
// small streamed chat request of the platform's own, the way a customer's goes: a route ticket, the rig's
// agent, the relay, the gateway's record, and the observation its tier is judged on. It is billed, like any
// request, to the platform's own probe account (ProbeAccount), so the provider is paid for what its rig served
// and the meter finds a ticket, a record and an account as it does for every request. Admission is skipped:
// the probes are the platform's own spending, bounded by their size (probeMaxTokens) and period.
//
// The same probes qualify a listing: a rig that is pending or offline, and heartbeats, is probed
// (routing.Candidate.Qualifying) with a slightly longer answer (qualifyMaxTokens), and the answer is judged
// (probeProblem): a valid OpenAI stream of chat completion chunks that names the listed model, with a token,
// its usage and its end. How it went, with its time to first token and throughput, goes to routing
// (ProbeTargets.RecordProbe), which makes the rig active after catalog.ProbesToQualify passes in a row.

// ProbeAccount is the platform's account and API key its probes are billed to.
type ProbeAccount struct {
	AccountID string
	APIKeyID  string
}

// ProbeTargets is what the prober asks of routing, and where it reports how a rig's qualifying probe went;
// *routing.Router implements it.
type ProbeTargets interface {
	ProbeTargets() []routing.Candidate
	RecordProbe(ctx context.Context, cand routing.Candidate, result catalog.ProbeResult) error
}

var _ ProbeTargets = (*routing.Router)(nil)

const (
	// probeMaxTokens is a tier probe's answer: one token, all a time to first token needs.
	probeMaxTokens = 1
	// qualifyMaxTokens is a qualifying probe's answer: enough tokens after the first for a throughput.
	qualifyMaxTokens = 16
	// probeTimeout bounds a probe, its answer included.
	probeTimeout = 30 * time.Second
)

// RunProbes probes, every routing.ProbeEvery until ctx ends, the offerings routing names, at most one probe
// in flight per offering, billed to the account account gives: asked for once, when there is first an
// offering to probe, and again after it failed. It returns at once when the router names no targets.
func (g *Gateway) RunProbes(ctx context.Context, account func(context.Context) (ProbeAccount, error)) {
	targets, ok := g.cfg.Router.(ProbeTargets)
	if !ok || g.cfg.Tickets == nil {
		return
	}
	var acct ProbeAccount
	var mu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := map[string]bool{}
	t := time.NewTicker(routing.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cands := targets.ProbeTargets()
		if len(cands) > 0 && acct.AccountID == "" {
			a, err := account(ctx)
			if err != nil {
				g.log.Error("gateway: no probe account; demoted offerings and new rigs are not probed", "err", err)
				continue
			}
			acct = a
		}
		for _, cand := range cands {
			mu.Lock()
			if busy[cand.OfferingID] {
				mu.Unlock()
				continue
			}
			busy[cand.OfferingID] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(busy, cand.OfferingID)
					mu.Unlock()
				}()
				result, judged := g.Probe(ctx, acct, cand)
				if !judged {
					return
				}
				if err := targets.RecordProbe(ctx, cand, result); err != nil && ctx.Err() == nil {
					g.log.Warn("gateway: a rig's probe not recorded", "offering", cand.OfferingID, "err", err)
				}
			})
		}
	}
}

// probeBody is a probe's request: a short streamed chat completion of maxTokens, with the usage chunk.
func probeBody(model string, maxTokens int64) []byte {
	body, _ := json.Marshal(map[string]any{ // a map of strings and numbers always marshals
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": "Reply with one word."}},
		"max_tokens":     maxTokens,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return body
}

// Probe sends the offering one probe in its tier (cand.Tier, at the price routing gave it) and reports how it
// went as every attempt is reported: observed by routing (streamed), recorded for the meter. It returns the
// probe's result, judged as a qualifying probe's answer is (probeProblem), and whether the rig was judged at all:
// a probe the platform itself failed to send or read says nothing of the rig.
func (g *Gateway) Probe(ctx context.Context, acct ProbeAccount, cand routing.Candidate) (catalog.ProbeResult, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	maxTokens := int64(probeMaxTokens)
	if cand.Qualifying {
		maxTokens = qualifyMaxTokens
	}
	body := probeBody(cand.Model, maxTokens)
	req := &gatewayRequest{ep: chatEndpoint, route: routing.Request{Model: cand.Model, Tier: cand.Tier, Offering: cand.OfferingID},
		stream: true, body: body,
		bounds: routing.BoundsFor(cand.Model, len(body), &maxTokens, 1, true)}
	key := accounts.APIKey{ID: acct.APIKeyID, AccountID: acct.AccountID}
	a := &attempt{cand: cand, requestID: g.cfg.NewRequestID(), start: g.now()}
	failed := func(problem string) (catalog.ProbeResult, bool) {
		return catalog.ProbeResult{At: g.now(), Problem: problem}, true
	}
	tk, err := g.cfg.Tickets.Sign(ticket.Claims{RequestID: a.requestID, AccountID: key.AccountID, APIKeyID: key.ID,
		OfferingID: cand.OfferingID, Tier: string(cand.Tier), Kind: req.ep.kind,
		AskInput: int64(cand.AskInput), AskOutput: int64(cand.AskOutput), PriceID: cand.PriceID,
		MaxInputTokens: req.bounds.MaxInputTokens, MaxOutputTokens: req.bounds.MaxOutputTokens, Stream: true, IssuedAt: a.start})
	if err != nil {
		g.log.Warn("gateway: probe not signed", "offering", cand.OfferingID, "err", err)
		return catalog.ProbeResult{}, false
	}
	resp, err := g.send(ctx, req, a, tk)
	if err != nil {
		a.end()
		g.observe(req, a, outcome{status: requestlog.GatewayError, at: g.now()})
		g.log.Info("gateway: probe unanswered", "offering", cand.OfferingID, "request_id", a.requestID, "err", err)
		return failed("its agent did not answer")
	}
	defer resp.Body.Close()
	if why := failedAnswer(req, resp); why != "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		a.end()
		o := outcome{httpStatus: resp.StatusCode, status: requestlog.GatewayFailedOver, at: g.now()}
		g.observe(req, a, o)
		g.record(key, req, a, o, admission.Hold{})
		g.log.Info("gateway: probe failed", "offering", cand.OfferingID, "request_id", a.requestID, "why", why)
		return failed(fmt.Sprintf("it answered HTTP %d, %s", resp.StatusCode, why))
	}
	// Relayed as a customer's stream is, into a recorder: the first token is timed where a client's would be.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, chatEndpoint.path, nil)
	if err != nil {
		a.end()
		return catalog.ProbeResult{}, false
	}
	rec := &lineRecorder{header: http.Header{}}
	c := g.echo.NewContext(hreq, rec)
	o := g.relay(c, req, a, resp)
	a.end()
	g.observe(req, a, o)
	// A probe is not admitted (the probe account pays the platform's own measurement), so
	// nothing is held for it.
	g.record(key, req, a, o, admission.Hold{})
	result := catalog.ProbeResult{At: o.at}
	if !o.firstToken.IsZero() {
		result.TTFTMs = float64(o.firstToken.Sub(a.start)) / float64(time.Millisecond)
	}
	if d := o.at.Sub(a.start); o.usage != nil && d > 0 {
		result.TokensPerSec = float64(o.usage.Input+o.usage.Output) / d.Seconds()
	}
	switch {
	case o.status != requestlog.GatewayOK:
		result.Problem = fmt.Sprintf("its answer broke off (HTTP %d)", o.httpStatus)
	case resp.StatusCode != http.StatusOK:
		result.Problem = fmt.Sprintf("it answered HTTP %d", resp.StatusCode)
	default:
		result.Problem = probeProblem(rec.body.Bytes(), cand.Model, o)
	}
	result.Passed = result.Problem == ""
	if !result.Passed {
		g.log.Info("gateway: probe's answer refused", "offering", cand.OfferingID, "request_id", a.requestID, "why", result.Problem)
	}
	return result, true
}

// probeChunk is what a probe reads of each chunk of the answer.
type probeChunk struct {
	Object string `json:"object"`
	Model  string `json:"model"`
}

// probeProblem says why a probe's relayed stream is not the valid answer of the listed model, or "" when it
// is: every event a chat completion chunk naming the model, at least one token, the usage and the end marker.
func probeProblem(stream []byte, model string, o outcome) string {
	if o.firstToken.IsZero() {
		return "its answer carried no token"
	}
	if o.usage == nil || o.usage.Output <= 0 {
		return "its answer carried no usage chunk with the tokens it produced"
	}
	done := false
	for _, line := range bytes.Split(stream, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == ':' { // a comment keeps a connection alive
			continue
		}
		if done {
			return "its answer went on after data: [DONE]"
		}
		payload, found := bytes.CutPrefix(line, []byte("data:"))
		payload = bytes.TrimSpace(payload)
		if found && string(payload) == "[DONE]" {
			done = true
			continue
		}
		var ch probeChunk
		if !found || json.Unmarshal(payload, &ch) != nil {
			return "its answer is not an OpenAI stream: a line is not a data line of JSON"
		}
		if ch.Object != "chat.completion.chunk" {
			return fmt.Sprintf("its answer is not an OpenAI stream: a chunk is a %q, not a chat.completion.chunk", ch.Object)
		}
		if ch.Model != model {
			return fmt.Sprintf("its answer named the model %q, not the listed %q", ch.Model, model)
		}
	}
	if !done {
		return "its answer ended without data: [DONE]"
	}
	return ""
}
