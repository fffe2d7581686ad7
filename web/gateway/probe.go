package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/web/gateway/probes"
)

// Probes (package probes; docs/tiers-and-asks.md, "Probes"; docs/listing-states.md): every routing.ProbeEvery
// the gateway sends each offering routing names a small streamed chat request of the platform's own, the way a
// customer's goes, billed to the platform's probe account; a qualifying probe's answer is judged
// (probes.Problem) and goes to routing.

// RunProbes probes, every routing.ProbeEvery until ctx ends, the offerings routing names, at most one probe
// in flight per offering, billed to the account account gives (probes.Run). It returns at once when the
// router names no targets.
func (g *Gateway) RunProbes(ctx context.Context, account func(context.Context) (probes.Account, error)) {
	targets, ok := g.cfg.Router.(probes.Targets)
	if !ok || g.cfg.Tickets == nil {
		return
	}
	probes.Run(ctx, targets, g.Probe, account, g.log)
}

// Probe sends the offering one probe in its tier (cand.Tier, at the price routing gave it) and reports how it
// went as every attempt is reported: observed by routing (streamed), recorded for the meter. It returns the
// probe's result, judged as a qualifying probe's answer is (probes.Problem), and whether the rig was judged at all:
// a probe the platform itself failed to send or read says nothing of the rig.
func (g *Gateway) Probe(ctx context.Context, acct probes.Account, cand routing.Candidate) (catalog.ProbeResult, bool) {
	ctx, cancel := context.WithTimeout(ctx, probes.Timeout)
	defer cancel()
	maxTokens := int64(probes.MaxTokens)
	if cand.Qualifying {
		maxTokens = probes.QualifyMaxTokens
	}
	body := probes.Body(cand.Model, maxTokens)
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
		result.Problem = probes.Problem(rec.body.Bytes(), cand.Model, o.firstToken, o.usage)
	}
	result.Passed = result.Problem == ""
	if !result.Passed {
		g.log.Info("gateway: probe's answer refused", "offering", cand.OfferingID, "request_id", a.requestID, "why", result.Problem)
	}
	return result, true
}
