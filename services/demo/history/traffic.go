package history

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/carbon"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// A day of the history: each customer's credit moves and requests, the gateway's records of
// their attempts, and their usage events metered in one batch at the day's end.

// seedDay makes the day's traffic and meters it.
func (h *history) seedDay(ctx context.Context, day time.Time, res *Result) error {
	var msgs []metering.Message
	for _, c := range h.customers {
		opening, err := h.credits.Balance(ctx, c.user.AccountID)
		if err != nil {
			return err
		}
		moves, err := h.creditMoves(ctx, c, day, opening.Pico, res)
		if err != nil {
			return err
		}
		reqs, err := h.requestsOf(c, day)
		if err != nil {
			return err
		}
		served := admit(opening.Pico, moves, reqs)
		res.Refused += len(reqs) - len(served)
		res.Requests += len(served)
		for _, r := range served {
			for _, a := range r.attempts {
				h.requestLog.Record(a.record)
				msgs = append(msgs, a.msg)
			}
			if r.end.After(c.lastUsed[r.keyID]) {
				c.lastUsed[r.keyID] = r.end
			}
		}
	}
	if err := h.requestLog.Flush(ctx); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	h.clock.set(day.Add(meterAt))
	out, err := h.meter.ProcessMessages(ctx, msgs)
	if err != nil {
		return err
	}
	if len(out.Rejections) > 0 {
		r := out.Rejections[0]
		return fmt.Errorf("the meter refused %d of the day's %d events, the first %s: %s", len(out.Rejections), len(msgs), r.Reason, r.Detail)
	}
	if out.Stored != len(msgs) {
		return fmt.Errorf("the meter stored %d of the day's %d events (%d deferred)", out.Stored, len(msgs), len(out.Deferred))
	}
	res.Events += out.Stored
	return nil
}

// request is one gateway request: its attempts (two when the first failed over), what it costs
// its customer, and when it started and ended.
type request struct {
	start, end time.Time
	keyID      string
	attempts   []attempt
	charge     money.Pico
}

// attempt is one try of a request on an offering: the gateway's record of it and its rig's
// usage event.
type attempt struct {
	record requestlog.GatewayRequest
	msg    metering.Message
}

// admit returns the requests admission lets through, in order of their start: those that
// start while the customer's credit (its opening balance, with the credit moves made before
// the request, less what the requests admitted before it cost) is above zero, as the gateway
// refuses a request once the balance less what it has committed is spent.
func admit(opening money.BigPico, moves []creditMove, reqs []request) []request {
	var out []request
	for _, r := range reqs {
		credit := opening
		for _, m := range moves {
			if !m.at.After(r.start) {
				credit = credit.AddPico(m.amount)
			}
		}
		for _, a := range out {
			credit = credit.AddPico(-a.charge)
		}
		if credit.Sign() > 0 {
			out = append(out, r)
		}
	}
	return out
}

// requestsOf makes the customer's requests of the day by its workloads, in order of their
// start.
func (h *history) requestsOf(c *customer, day time.Time) ([]request, error) {
	var specs []spec
	for wi, w := range c.Workloads {
		cands := h.candidates(w)
		if len(cands) == 0 {
			continue // no demo offering serves it now
		}
		rng := newRand("requests", c.Email, w.Key, day.Format(time.DateOnly))
		models := make([]*simulation.Model, min(len(cands), 2))
		for i := range models {
			models[i] = simulation.NewModel(cands[i].profile, rng.Uint64())
		}
		n := w.requestsOn(day, rng.Float64())
		rate, last := benchRate(cands[0]), w.lastStart(day)
		var start time.Time
		for i := range n {
			// Requests come in bursts of burstSize, each after the last at the benchmark's rate (Poisson
			// arrivals), so that several are in flight on the rig at once, as in the run its claim copies.
			if i%burstSize == 0 {
				start = w.startIn(day, rng.Float64(), rng.Float64())
			} else {
				start = start.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
			}
			if start.After(last) {
				start = last
			}
			s := spec{w: &c.Workloads[wi], cands: cands, i: i, start: start}
			s.draw(rng, models)
			specs = append(specs, s)
		}
	}
	slices.SortFunc(specs, func(a, b spec) int {
		return cmp.Or(a.start.Compare(b.start), strings.Compare(a.w.Key, b.w.Key), cmp.Compare(a.i, b.i))
	})
	markFailures(specs, day)
	if c.Email == overReporter && day.Equal(h.overReportDay()) {
		markOverReport(specs)
	}
	out := make([]request, 0, len(specs))
	for i := range specs {
		r, err := h.build(c, day, &specs[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// benchRate is the request rate of the benchmark run an offering's claims copy (the level whose P99 time to
// first token is the claimed one), in requests per second; the profile's lowest rate when none is.
func benchRate(o offering) float64 {
	rate := 0.0
	for _, l := range o.profile.Levels {
		if o.ClaimedTTFTP99Ms != nil && l.TTFTP99Ms == *o.ClaimedTTFTP99Ms {
			return l.QPS
		}
		if rate == 0 || l.QPS < rate {
			rate = l.QPS
		}
	}
	return max(rate, 1)
}

// spec is a request before it is routed: what its client sends and what its rigs would do.
type spec struct {
	w     *Workload
	cands []offering
	i     int // its place among its workload's requests of the day
	start time.Time
	// in is its prompt and out its answer, in tokens; maxTokens its max_tokens (0: none).
	in, out, maxTokens int64
	// lat are the latencies of its first and second candidates.
	lat              [2]simulation.Latency
	failover, cancel bool
	// overReport: its rig reports more output than it produced (overReporter).
	overReport bool
}

// draw draws the request's prompt and answer, as the benchmark's rigs saw them, and its
// latencies on each candidate, at the tier's concurrency.
func (s *spec) draw(rng *rand.Rand, models []*simulation.Model) {
	w, first := s.w, s.cands[0]
	mean := float64(w.Prompt)
	if mean == 0 {
		mean = first.meanPrompt
	}
	s.in = max(1, int64(math.Round(mean*(0.5+rng.Float64()))))
	// An answer is drawn as simbackend draws one: between half and one and a half times the
	// profile's mean output, cut at max_tokens.
	s.out = max(1, int64(math.Round(first.profile.MeanOutputTokens()*(0.5+rng.Float64()))))
	s.maxTokens = w.MaxTokens
	if s.maxTokens > 0 {
		s.out = min(s.out, s.maxTokens)
	}
	// The prompt and the longest answer fit the model's context window.
	s.in = min(s.in, routing.OutputLimit(w.Model)-max(s.maxTokens, s.out))
	for i, m := range models {
		s.lat[i] = m.Draw(concurrency[w.Tier])
	}
}

// markFailures marks, on their days, the first request of each workload that has a second
// offering to fail over to, and the customer's first streamed request to be canceled.
func markFailures(specs []spec, day time.Time) {
	failed := map[string]bool{}
	canceled := false
	for i := range specs {
		s := &specs[i]
		if failsOverOn(day) && len(s.cands) > 1 && !failed[s.w.Key] {
			s.failover, failed[s.w.Key] = true, true
			continue
		}
		if cancelsOn(day) && s.w.Stream && !canceled {
			s.cancel, canceled = true, true
		}
	}
}

// markOverReport marks the first streamed request with a max_tokens that neither fails over
// nor is canceled: its rig over-reports it.
func markOverReport(specs []spec) {
	for i := range specs {
		if s := &specs[i]; s.w.Stream && s.maxTokens > 0 && !s.failover && !s.cancel {
			s.overReport = true
			return
		}
	}
}

// overReportDay is the first day of the month before today's: always in the history (see
// firstDay), in a month the platform closes.
func (h *history) overReportDay() time.Time {
	return time.Date(h.today.Year(), h.today.Month()-1, 1, 0, 0, 0, 0, time.UTC)
}

// build routes a request as the gateway would: one attempt on its first candidate, or, when it
// fails over, a failed attempt there and one on the second.
func (h *history) build(c *customer, day time.Time, s *spec) (request, error) {
	r := request{start: s.start, keyID: c.keys[keyName(*s.w)]}
	at, served, lat := s.start, s.cands[0], s.lat[0]
	if s.failover {
		a, end, err := h.failedAttempt(c, day, s, served, at)
		if err != nil {
			return request{}, err
		}
		r.attempts = append(r.attempts, a)
		at, served, lat = end.Add(time.Millisecond), s.cands[1], s.lat[1]
	}
	a, end, charge, err := h.servedAttempt(c, day, s, served, at, lat, len(r.attempts))
	if err != nil {
		return request{}, err
	}
	r.attempts = append(r.attempts, a)
	r.end, r.charge = end, charge
	return r, nil
}

// routed is an attempt as the gateway sends it: its id, its ticket and the terms it fixes.
type routed struct {
	requestID string
	ticket    string
	price     catalog.Price
	bounds    routing.Bounds
	bodyBytes int64
}

// route signs the ticket of an attempt at at, with the terms routing fixes: the offering's
// asks, the price in force at that moment for its model in its tier (the model's own row, else the
// tier's default), and the bounds on billable tokens.
func (h *history) route(c *customer, day time.Time, s *spec, off offering, at time.Time, n int) (routed, error) {
	price, ok := h.book.At(off.Tier, off.Model, at)
	if !ok {
		return routed{}, fmt.Errorf("no %s price in force at %s", off.Tier, at.Format(time.RFC3339))
	}
	var maxTokens *int64
	if s.maxTokens > 0 {
		maxTokens = &s.maxTokens
	}
	r := routed{price: price, bodyBytes: s.in*bytesPerToken + bodyOverhead,
		requestID: timeOrderedID("req_", at, c.user.AccountID, s.w.Key, day.Format(time.DateOnly), strconv.Itoa(s.i), strconv.Itoa(n))}
	r.bounds = routing.BoundsFor(s.w.Model, int(r.bodyBytes), maxTokens, 1, true)
	var err error
	r.ticket, err = h.signer.Sign(ticket.Claims{RequestID: r.requestID, AccountID: c.user.AccountID,
		APIKeyID: c.keys[keyName(*s.w)], OfferingID: off.ID, Tier: string(off.Tier),
		AskInput: int64(off.AskInput), AskOutput: int64(off.AskOutput), PriceID: price.ID,
		MaxInputTokens: r.bounds.MaxInputTokens, MaxOutputTokens: r.bounds.MaxOutputTokens, Stream: s.w.Stream, IssuedAt: at})
	return r, err
}

// servedAttempt is an attempt the rig answers: whole, or canceled by the client once part of
// the answer was relayed. It returns when the gateway had the last byte and what the customer
// is charged.
func (h *history) servedAttempt(c *customer, day time.Time, s *spec, off offering, at time.Time, lat simulation.Latency, n int) (attempt, time.Time, money.Pico, error) {
	rt, err := h.route(c, day, s, off, at, n)
	if err != nil {
		return attempt{}, time.Time{}, 0, err
	}
	out, status, gwStatus := s.out, usage.StatusOK, requestlog.GatewayOK
	if s.cancel {
		out, status, gwStatus = max(1, int64(math.Round(float64(s.out)*cancelShare))), usage.StatusCanceled, requestlog.GatewayCanceled
	}
	served := lat.TTFT + time.Duration(out-1)*lat.TPOT
	agentStart := at.Add(agentLag)
	agentEnd := agentStart.Add(served)
	end := agentEnd.Add(relayLag)
	rec := h.record(c, s, off, rt, at, end)
	rec.HTTPStatus, rec.Status = 200, gwStatus
	if s.w.Stream { // a whole answer has no time to first token
		rec.TTFT = agentLag + lat.TTFT + relayLag
	}
	if status == usage.StatusOK {
		rec.Usage = &admission.TokenCount{Input: s.in, Output: out} // the stream's usage chunk
	}
	rec.RelayedOutputBytes = out * bytesPerToken
	if s.w.Stream {
		rec.RelayedOutputChunks = out
	} else {
		rec.RelayedOutputBytes += responseOverhead
	}
	reported := out
	if s.overReport {
		reported = s.maxTokens * overReportFactor
	}
	msg, err := h.event(off, rt, agentEnd, usage.Usage{InputTokens: s.in, OutputTokens: reported,
		TTFTMillis: millis(lat.TTFT), DurationMillis: millis(served), Status: status})
	if err != nil {
		return attempt{}, time.Time{}, 0, err
	}
	charge, err := chargeOf(s.in, out, rt.price)
	return attempt{record: rec, msg: msg}, end, charge, err
}

// failedAttempt is an attempt whose rig answers 503 before any byte: the gateway records it as
// failed over, and the rig reports it with nothing produced. It returns when the gateway had
// the answer.
func (h *history) failedAttempt(c *customer, day time.Time, s *spec, off offering, at time.Time) (attempt, time.Time, error) {
	rt, err := h.route(c, day, s, off, at, 0)
	if err != nil {
		return attempt{}, time.Time{}, err
	}
	agentEnd := at.Add(agentLag + failedAfter)
	end := agentEnd.Add(relayLag)
	rec := h.record(c, s, off, rt, at, end)
	rec.HTTPStatus, rec.Status = 503, requestlog.GatewayFailedOver
	msg, err := h.event(off, rt, agentEnd, usage.Usage{DurationMillis: millis(failedAfter), Status: usage.StatusError})
	return attempt{record: rec, msg: msg}, end, err
}

// record is the gateway's record of an attempt, but for how it ended.
func (h *history) record(c *customer, s *spec, off offering, rt routed, at, end time.Time) requestlog.GatewayRequest {
	return requestlog.GatewayRequest{RequestID: rt.requestID, AccountID: c.user.AccountID, APIKeyID: c.keys[keyName(*s.w)],
		OfferingID: off.ID, Tier: off.Tier, Model: s.w.Model, Duration: end.Sub(at), At: end,
		InputBytes: rt.bodyBytes, MaxInputTokens: rt.bounds.MaxInputTokens, MaxOutputTokens: rt.bounds.MaxOutputTokens,
		Streamed: s.w.Stream}
}

// event is the rig's usage event of an attempt that ended at end, as its agent writes it,
// stored by the stream storedLag later. Its energy is its tokens (input and output) at the
// rig's configuration's energy per token in the benchmark (board power over the run's tokens
// per second at carbon.ReferenceRate), so that a rig's energy per million tokens is the same
// from request to request and hardware to hardware as the benchmark has it. A rig in a data
// centre has a power sensor, here a simulated one that reads measuredDraw of board power, and
// says so (simulated, never measured); a home rig has none, and its agent estimates from full
// board power. An attempt that produced nothing took no energy worth counting.
func (h *history) event(off offering, rt routed, end time.Time, u usage.Usage) (metering.Message, error) {
	u.RequestID, u.Ticket, u.OfferingID, u.Model = rt.requestID, rt.ticket, off.ID, off.Model
	u.EnergyJoules = float64(u.InputTokens+u.OutputTokens) * off.joulesPerToken
	u.EnergySource = usage.EnergyEstimated
	if off.Site == carbon.SiteDatacentre {
		u.EnergyJoules *= measuredDraw
		u.EnergySource = usage.EnergySimulated
	}
	ev := usage.NewEvent(timeOrderedID("evt_", end, rt.requestID), off.ProviderAccountID, off.ID, end, u)
	raw, err := usage.Encode(ev)
	if err != nil {
		return metering.Message{}, err
	}
	return metering.Message{Subject: events.UsageSubject(off.ProviderAccountID, off.ID), Data: raw, Stored: end.Add(storedLag)}, nil
}

// chargeOf is what a request's billable tokens cost at its price, as the meter charges it:
// nothing when it produced no output token.
func chargeOf(in, out int64, p catalog.Price) (money.Pico, error) {
	if out == 0 {
		return 0, nil
	}
	a, err := money.ChargeFor(in, p.Input)
	if err != nil {
		return 0, err
	}
	b, err := money.ChargeFor(out, p.Output)
	if err != nil {
		return 0, err
	}
	return a.Add(b)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// timeOrderedID is an id as the platform's are made (services.NewTimeOrderedID): the prefix,
// the time in milliseconds (12 hex digits), then 80 bits, here derived from what the id
// names instead of drawn, so that every run makes the same ids.
func timeOrderedID(prefix string, at time.Time, parts ...string) string {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	sum := sha256.Sum256([]byte(strings.Join(append([]string{prefix}, parts...), "\x00")))
	return prefix + hex.EncodeToString(ms[2:]) + hex.EncodeToString(sum[:10])
}

// newRand is a random source determined by what it is for.
func newRand(parts ...string) *rand.Rand {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}
