package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/billing"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// Probes (docs/tiers-and-asks.md, "Probes"). An offering demoted by its measured P99 is routed only in a worse
// tier, whose traffic may bring it no streamed request: without one its window never shows that it recovered.
// So, every routing.ProbeEvery, the gateway sends each offering routing names (routing.Router.ProbeTargets) a
// small streamed chat request of the platform's own, the way a customer's goes: a route ticket, the rig's
// agent, the relay, the gateway's record, and the observation its tier is judged on. It is billed, like any
// request, to the platform's own probe account (ProbeAccount), so the provider is paid for what its rig served
// and the meter finds a ticket, a record and an account as it does for every request. Admission is skipped:
// the probes are the platform's own spending, bounded by their size (probeMaxTokens) and period.

// ProbeAccount is the platform's account and API key its probes are billed to.
type ProbeAccount struct {
	AccountID string
	APIKeyID  string
}

// ProbeTargets is what the prober asks of routing; *routing.Router implements it.
type ProbeTargets interface {
	ProbeTargets() []routing.Candidate
}

const (
	// probeMaxTokens is a probe's answer: one token, all a time to first token needs.
	probeMaxTokens = 1
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
				g.log.Error("gateway: no probe account; demoted offerings are not probed", "err", err)
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
				g.Probe(ctx, acct, cand)
			})
		}
	}
}

// probeBody is a probe's request: a short streamed chat completion of one token, with the usage chunk.
func probeBody(model string) []byte {
	body, _ := json.Marshal(map[string]any{ // a map of strings and numbers always marshals
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": "Reply with one word."}},
		"max_tokens":     probeMaxTokens,
		"stream":         true,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return body
}

// Probe sends the offering one probe in its tier (cand.Tier, at the price routing gave it) and reports how it
// went as every attempt is reported: observed by routing (streamed), recorded for the meter.
func (g *Gateway) Probe(ctx context.Context, acct ProbeAccount, cand routing.Candidate) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body := probeBody(cand.Model)
	maxTokens := int64(probeMaxTokens)
	req := &gatewayRequest{ep: chatEndpoint, route: routing.Request{Model: cand.Model, Tier: cand.Tier, Offering: cand.OfferingID},
		stream: true, body: body,
		bounds: routing.BoundsFor(cand.Model, len(body), &maxTokens, 1, true)}
	key := accounts.APIKey{ID: acct.APIKeyID, AccountID: acct.AccountID}
	a := &attempt{cand: cand, requestID: g.cfg.NewRequestID(), start: g.now()}
	tk, err := g.cfg.Tickets.Sign(ticket.Claims{RequestID: a.requestID, AccountID: key.AccountID, APIKeyID: key.ID,
		OfferingID: cand.OfferingID, Tier: string(cand.Tier), Kind: req.ep.kind,
		AskInput: int64(cand.AskInput), AskOutput: int64(cand.AskOutput), PriceID: cand.PriceID,
		MaxInputTokens: req.bounds.MaxInputTokens, MaxOutputTokens: req.bounds.MaxOutputTokens, Stream: true, IssuedAt: a.start})
	if err != nil {
		g.log.Warn("gateway: probe not signed", "offering", cand.OfferingID, "err", err)
		return
	}
	resp, err := g.send(ctx, req, a, tk)
	if err != nil {
		a.end()
		g.observe(req, a, outcome{status: billing.GatewayError, at: g.now()})
		g.log.Info("gateway: probe unanswered", "offering", cand.OfferingID, "request_id", a.requestID, "err", err)
		return
	}
	defer resp.Body.Close()
	if why := failedAnswer(req, resp); why != "" {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		a.end()
		o := outcome{httpStatus: resp.StatusCode, status: billing.GatewayFailedOver, at: g.now()}
		g.observe(req, a, o)
		g.record(key, req, a, o, billing.Hold{})
		g.log.Info("gateway: probe failed", "offering", cand.OfferingID, "request_id", a.requestID, "why", why)
		return
	}
	// Relayed as a customer's stream is, into a recorder: the first token is timed where a client's would be.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, chatEndpoint.path, nil)
	if err != nil {
		a.end()
		return
	}
	c := g.echo.NewContext(hreq, &lineRecorder{header: http.Header{}})
	o := g.relay(c, req, a, resp)
	a.end()
	g.observe(req, a, o)
	// A probe is not admitted (the probe account pays the platform's own measurement), so
	// nothing is held for it.
	g.record(key, req, a, o, billing.Hold{})
}
