// Package probes is when the gateway probes the offerings routing names, and how a probe's answer is
// judged (docs/tiers-and-asks.md, "Probes"; docs/listing-states.md). An offering demoted by its measured P99 is
// routed only in a worse tier, whose traffic may bring it no streamed request: without one its window never
// shows that it recovered. So, every routing.ProbeEvery, the gateway sends each offering routing names
// (routing.Router.ProbeTargets) a small streamed chat request of the platform's own (Body), the way a
// customer's goes: a route ticket, the rig's agent, the relay, the gateway's record, and the observation its
// tier is judged on. It is billed, like any request, to the platform's own probe account (Account), so the
// provider is paid for what its rig served and the meter finds a ticket, a record and an account as it does
// for every request. Admission is skipped: the probes are the platform's own spending, bounded by their size
// (MaxTokens) and period.
//
// The same probes qualify a listing: a rig that is pending or offline, and heartbeats, is probed
// (routing.Candidate.Qualifying) with a slightly longer answer (QualifyMaxTokens), and the answer is judged
// (Problem): a valid OpenAI stream of chat completion chunks that names the listed model, with a token, its
// usage and its end. How it went, with its time to first token and throughput, goes to routing
// (Targets.RecordProbe), which makes the rig active after catalog.ProbesToQualify passes in a row.
//
// Sending a probe is the gateway's own (gateway.Gateway.Probe): it goes through the gateway's attempts, relay
// and records. This package imports none of the gateway's packages.
package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/routing"
)

// Account is the platform's account and API key its probes are billed to.
type Account struct {
	AccountID string
	APIKeyID  string
}

// Targets is what the prober asks of routing, and where it reports how a rig's qualifying probe went;
// *routing.Router implements it.
type Targets interface {
	ProbeTargets() []routing.Candidate
	RecordProbe(ctx context.Context, cand routing.Candidate, result catalog.ProbeResult) error
}

var _ Targets = (*routing.Router)(nil)

const (
	// MaxTokens is a tier probe's answer: one token, all a time to first token needs.
	MaxTokens = 1
	// QualifyMaxTokens is a qualifying probe's answer: enough tokens after the first for a throughput.
	QualifyMaxTokens = 16
	// Timeout bounds a probe, its answer included.
	Timeout = 30 * time.Second
)

// Probe sends the offering one probe and returns its result, and whether the rig was judged at all: a probe
// the platform itself failed to send or read says nothing of the rig. gateway.Gateway.Probe is one.
type Probe func(ctx context.Context, acct Account, cand routing.Candidate) (catalog.ProbeResult, bool)

// Run probes, every routing.ProbeEvery until ctx ends, the offerings targets names, at most one probe in
// flight per offering, billed to the account account gives: asked for once, when there is first an offering
// to probe, and again after it failed. A judged probe's result goes to targets.RecordProbe.
func Run(ctx context.Context, targets Targets, probe Probe, account func(context.Context) (Account, error), log *slog.Logger) {
	var acct Account
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
				log.Error("gateway: no probe account; demoted offerings and new rigs are not probed", "err", err)
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
				result, judged := probe(ctx, acct, cand)
				if !judged {
					return
				}
				if err := targets.RecordProbe(ctx, cand, result); err != nil && ctx.Err() == nil {
					log.Warn("gateway: a rig's probe not recorded", "offering", cand.OfferingID, "err", err)
				}
			})
		}
	}
}

// Body is a probe's request: a short streamed chat completion of maxTokens, with the usage chunk.
func Body(model string, maxTokens int64) []byte {
	body, _ := json.Marshal(map[string]any{ // a map of strings and numbers always marshals
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": "Reply with one word."}},
		"max_tokens":     maxTokens,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return body
}

// chunk is what a probe reads of each chunk of the answer.
type chunk struct {
	Object string `json:"object"`
	Model  string `json:"model"`
}

// Problem says why a probe's relayed stream is not the valid answer of the listed model, or "" when it is:
// every event a chat completion chunk naming the model, at least one token (firstToken, when the relay saw
// it), the usage and the end marker.
func Problem(stream []byte, model string, firstToken time.Time, usage *admission.TokenCount) string {
	if firstToken.IsZero() {
		return "its answer carried no token"
	}
	if usage == nil || usage.Output <= 0 {
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
		var ch chunk
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
