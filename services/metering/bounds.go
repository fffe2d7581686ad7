package metering

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// What a rig may bill is bounded by what the gateway saw (see docs/metering-integrity.md):
// the route ticket's bounds (the input the gateway forwarded, the max_tokens it sent) and the
// gateway's record of the attempt (gateway_requests: how it ended, what output it relayed).
// Nothing a rig reports is billed beyond them.

// Flag says why a usage row's bill differs from what its rig reported, or why the bill could
// not be checked against a complete record of the request. It is stored on the row (flag,
// with flag_reason in words) and listed on the discrepancies page.
type Flag string

const (
	// FlagClipped: the rig reported more tokens than the bounds allow; the bounds were billed.
	FlagClipped Flag = "clipped"
	// FlagIncomplete: the gateway did not see the request complete (the client went away or
	// the response broke off after a 2xx); billed within the bounds.
	FlagIncomplete Flag = "incomplete"
	// FlagFailedAttempt: the gateway saw the attempt fail (it failed over, or the rig answered
	// outside 2xx, or the client left before the rig answered); nothing was billed.
	FlagFailedAttempt Flag = "failed_attempt"
	// FlagNoGatewayRecord: the gateway's record of the attempt never came (the gateway
	// stopped between relaying and recording); billed within the ticket's bounds only.
	FlagNoGatewayRecord Flag = "no_gateway_record"
)

// gatewayRecord is what the gateway saw of an attempt, as the meter bills by it.
type gatewayRecord struct {
	httpStatus int
	status     requestlog.GatewayStatus
	// relayedBytes and relayedChunks are the output the gateway relayed: a stream's output
	// text bytes and its chunks that carried output, or a whole response's body bytes. counted
	// is false in records of a gateway that did not count them.
	relayedBytes, relayedChunks int64
	counted                     bool
	// cachedSeen are the cached input tokens the answer's usage showed the client, when sawCached.
	cachedSeen int64
	sawCached  bool
}

// failed is true for an attempt the gateway saw fail: nothing of it is billable.
func (r *gatewayRecord) failed() bool {
	return r.status == requestlog.GatewayFailedOver || r.httpStatus < 200 || r.httpStatus > 299
}

// outputSlack is ticket.OutputSlack, named here for the tests that check the bill by it.
const outputSlack = ticket.OutputSlack

// tokenBill is what an event may be billed for: its tokens, with a flag when they are not
// simply what the rig reported; or, with wait > 0, not yet anything: the gateway's record has
// not landed and the event is looked at again after wait.
type tokenBill struct {
	in, out int64
	cached  int64 // of in, billed at the cached price
	flag    Flag
	detail  string
	wait    time.Duration
}

// recordWaits are how long an event waits for the gateway's record (MeterConfig).
type recordWaits struct {
	settle, max time.Duration
}

// billableTokens bounds what a rig reported by what the gateway saw. age is how long the
// event has been in the stream.
func billableTokens(u usage.Usage, c ticket.Claims, rec *gatewayRecord, age time.Duration, w recordWaits) tokenBill {
	reportedOut := u.OutputTokens
	if c.Kind == ticket.KindEmbedding {
		reportedOut = 0 // an embedding is billed for its input only
	}
	if rec == nil {
		if age < w.max {
			return tokenBill{wait: deferDelay(age, w)}
		}
		bound := ticket.BillableOf(c.MaxInputTokens, c.MaxOutputTokens, false, 0, 0)
		b := tokenBill{in: min(u.InputTokens, bound.Input), out: min(reportedOut, bound.Output), flag: FlagNoGatewayRecord}
		b.cached = min(u.CachedInputTokens, b.in)
		b.detail = fmt.Sprintf("no gateway record of the attempt after %s: billed within the ticket's bounds only "+
			"(at most %d input and %d output tokens)", w.max, c.MaxInputTokens, c.MaxOutputTokens)
		return b
	}
	if rec.failed() {
		return tokenBill{flag: FlagFailedAttempt, detail: fmt.Sprintf("the gateway saw the attempt fail (%s, HTTP %d): "+
			"nothing is billable of the rig's %d input and %d output tokens", rec.status, rec.httpStatus, u.InputTokens, reportedOut)}
	}
	// The bounds admission holds by too (ticket.BillableOf): what a rig reports is never billed
	// past them, so admission's hold covers whatever the meter bills.
	bound := ticket.BillableOf(c.MaxInputTokens, c.MaxOutputTokens, rec.counted, rec.relayedBytes, rec.relayedChunks)
	b := tokenBill{in: min(u.InputTokens, bound.Input), out: min(reportedOut, bound.Output)}
	var clipped []string
	if b.in < u.InputTokens {
		clipped = append(clipped, fmt.Sprintf("input clipped from %d to the ticket's bound of %d tokens", u.InputTokens, b.in))
	}
	// Cached input: the rig's figure, but no fewer than the answer showed the client, and never
	// more than the input billed (docs/metering-integrity.md, "Cached input tokens").
	b.cached = u.CachedInputTokens
	if rec.sawCached && rec.cachedSeen > b.cached {
		b.cached = rec.cachedSeen
	}
	b.cached = min(b.cached, b.in)
	if b.cached > u.CachedInputTokens {
		clipped = append(clipped, fmt.Sprintf("cached input raised from %d to %d tokens, what the answer's usage showed the client",
			u.CachedInputTokens, b.cached))
	}
	if b.out < reportedOut {
		// Written only for the events it concerns: the meter judges every event here.
		why := fmt.Sprintf("the ticket's bound of %d", c.MaxOutputTokens)
		if bound.Output < c.MaxOutputTokens {
			why = fmt.Sprintf("what the gateway relayed, %d bytes in %d chunks", rec.relayedBytes, rec.relayedChunks)
		}
		clipped = append(clipped, fmt.Sprintf("output clipped from %d to %d tokens, %s", reportedOut, b.out, why))
	}
	switch {
	case rec.status != requestlog.GatewayOK:
		b.flag = FlagIncomplete
		b.detail = fmt.Sprintf("the gateway did not see the request complete (%s after HTTP %d): billed within its bounds",
			rec.status, rec.httpStatus)
		if len(clipped) > 0 {
			b.detail += "; " + strings.Join(clipped, "; ")
		}
	case len(clipped) > 0:
		b.flag, b.detail = FlagClipped, strings.Join(clipped, "; ")
	}
	return b
}

// minDeferral is the shortest an event is put off for, so that a clock that disagrees with
// the stream's never makes the meter spin on one event.
const minDeferral = 50 * time.Millisecond

// deferDelay is how long an event without a gateway record waits before it is looked at
// again: until it has been in the stream for the settle time, then for half its age again
// (at least the settle time), so that an event whose record never comes is looked at about a
// dozen times before it is billed without one, at w.max.
func deferDelay(age time.Duration, w recordWaits) time.Duration {
	age = max(age, 0)
	if age < w.settle {
		return max(w.settle-age, minDeferral)
	}
	d := min(max(age/2, w.settle), w.max-age)
	return max(d, minDeferral)
}
