package routing

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reliability"
)

const (
	// MaxCandidates is how many offerings Pick returns at most: a first choice and two to fail over to.
	MaxCandidates = 3
	// nearEqualPercent: blended asks within this many percent of the cheapest are near-equals, among which the
	// faster wins rather than the cheaper.
	nearEqualPercent = 5
	// minLiveSamples is how many live times to first token make the live P50 the expected wait. A median
	// settles on far fewer requests than a P99 does (catalog.MinMeasuredRequests), and routing on it early is
	// what moves traffic off a slow rig.
	minLiveSamples = 20
	// unknownBatchTTFTMs is the expected time to first token of a batch offering nothing is known of.
	unknownBatchTTFTMs = 10 * catalog.StandardMaxP99Ms
)

// Request is what a gateway request asks of routing.
type Request struct {
	Model string
	// Tier is the service level asked for; empty means standard. Only offerings in that tier serve it.
	Tier catalog.Tier
	// MaxPricePerMTok caps the offering's blended ask per million tokens, (input ask + output ask) / 2
	// (catalog.Offering.BlendedAsk), as the catalog's max price filter does; 0 means no cap. The customer pays
	// the tier's price whatever the ask; the cap chooses whose rig serves.
	MaxPricePerMTok money.MicroUSD
	// MaxTTFTMillis caps the offering's P99 time to first token: the live one with catalog.MinMeasuredRequests
	// observations in the window, else the catalog's (measured earlier or claimed); an offering with neither is
	// excluded. 0 means no cap.
	MaxTTFTMillis float64
	// Offering pins the request to one offering, which must pass every other rule; there is no failover.
	Offering string
	// PreferCarbon orders the candidates by estimated gCO2e per token instead of by ask (carbon.go).
	PreferCarbon bool
	// Preferences narrow and order the candidates as the request's provider object and gpumarket's own rules
	// say (preferences.go); nil changes nothing. An explicit sort orders instead of PreferCarbon.
	Preferences *Preferences
	// Conversation names the conversation the request belongs to, so that it goes first to the offering that
	// served the conversation last (sticky.go); "" for none. It is not looked up for a pinned offering, an
	// explicit provider order or sort, or a request that opens its conversation (ConversationStarts).
	Conversation string
	// ConversationStarts says the request is its conversation's first: the offering that serves it becomes the
	// conversation's, but it routes as any other request, however many requests opened the same way before.
	ConversationStarts bool
}

// Validate checks the request's fields, named as in the gateway's request body.
func (req Request) Validate() error {
	fe := services.FieldErrors{}
	if req.Model == "" {
		fe.Add("model", "Name a model; GET /v1/models lists them.")
	}
	if req.Tier != "" && !req.Tier.Valid() {
		fe.Add("tier", "Choose realtime, standard or batch.")
	}
	if req.MaxPricePerMTok < 0 {
		fe.Add("max_price_per_mtok", "Use a price of $0 or more per million tokens.")
	}
	if req.MaxTTFTMillis < 0 {
		fe.Add("max_ttft_ms", "Use a positive number of milliseconds.")
	}
	if field, problem := req.Preferences.Check(); field != "" {
		fe.Add(field, problem)
	}
	return fe.Err()
}

// Candidate is an offering Pick chose, with what the gateway needs to send it the request and the terms the
// route ticket fixes for it.
type Candidate struct {
	OfferingID string
	ProviderID string
	Model      string
	Tier       catalog.Tier
	// Qualifying marks a probe target whose rig is pending or offline (ProbeTargets): the probe's outcome
	// decides whether it becomes active (RecordProbe). Pick never returns such an offering.
	Qualifying bool
	// AskInput and AskOutput are the offering's asks per million input and output tokens as the router held
	// them at Pick: what its provider is paid for the request, whatever it asks later.
	AskInput  money.MicroUSD
	AskOutput money.MicroUSD
	// PriceID is the row of the price book (catalog.Price.ID) in force for the model in the tier at the moment
	// of Pick (the model's own row, else the tier's default), and
	// PriceInput and PriceOutput its prices per million input and output tokens: what the customer pays. They
	// cover the asks (catalog.Price.Covers).
	PriceID     int64
	PriceInput  money.MicroUSD
	PriceOutput money.MicroUSD
	// PriceCachedInput is the price's cached input price (catalog.Price.CachedInput): what an input token
	// the engine served from its prompt cache costs.
	PriceCachedInput money.MicroUSD
	GPUName          string // the rig's GPU model, e.g. "RTX 4090"
	GPUCount         int
	// TTFTP50Ms is the expected time to first token routing used; TTFTP99Ms the P99 the latency cap was
	// checked against (0 when unknown). Both are live figures when the window holds enough traffic, else the
	// catalog's.
	TTFTP50Ms float64
	TTFTP99Ms float64
	InFlight  int // the load routing saw: this gateway's in-flight requests or the rig's last report
	Capacity  int // from the rig's heartbeat
	// GCO2ePerToken is the offering's estimated carbon per token (carbon.go); 0 when unknown.
	GCO2ePerToken float64
	// Native names the APIs besides chat completions its rig's engine serves natively, from its last heartbeat
	// (Heartbeat.Native).
	Native []string
}

// What Pick fails with, as the Cause of a *services.Error: errors.Is tells them apart, services.ErrorCode gives
// the status. An unknown model is not_found (404 model_not_found, as OpenAI answers); a pinned offering that
// does not serve the model is not_found; everything else is unavailable (503).
var (
	ErrNotLoaded       = errors.New("routing: the catalog is not loaded yet")
	ErrUnknownModel    = errors.New("routing: no offering serves the model")
	ErrUnknownOffering = errors.New("routing: the pinned offering does not serve the model")
	ErrTierNotOffered  = errors.New("routing: the model is not offered in the tier")
	ErrOverCaps        = errors.New("routing: no offering of the model in the tier is under the caps")
	ErrUnavailable     = errors.New("routing: no offering of the model in the tier is healthy")
	// ErrPreferences is a request whose provider preferences leave no offering (preferences.go). Its code says
	// why: not_found for names that name nothing, invalid for preferences that contradict each other, unavailable
	// for rules no offering meets now; its Fields name the field.
	ErrPreferences = errors.New("routing: no offering of the model meets the request's provider preferences")
)

// choice is an offering going through Pick's filters.
type choice struct {
	*listed
	v        view
	tier     catalog.Tier
	price    catalog.Price // the model's in the tier, in force at Pick
	p50, p99 float64
	// tps is the throughput routing goes by: the live window's, else the catalog's; 0 when unknown.
	tps       float64
	saturated bool
	// gco2ePerToken is the estimated carbon per token, 0 when unknown (carbon.go).
	gco2ePerToken float64
	// borrowed marks a rig of a faster tier serving a batch request in an idle slot
	// (idleForBatch).
	borrowed bool
	// standing is where its uptime places it (reliability.go).
	standing reliability.Standing
}

// idleForBatch is c as a candidate for a batch request when its rig sits in a faster tier but
// has idle capacity: its last heartbeat reports at least two free slots, so that one stays
// for the requests of its own tier, and both its asks are within the batch tier's price in
// force, which the request pays. Such a rig serves batch work only when it would otherwise sit
// idle, and after every batch rig (docs/batches.md, "Idle capacity").
func (s *snapshot) idleForBatch(c choice, tier catalog.Tier, now time.Time) (choice, bool) {
	if tier != catalog.TierBatch || c.tier == catalog.TierBatch || c.v.capacity <= 0 || c.v.load+2 > c.v.capacity {
		return choice{}, false
	}
	p, ok := s.offered(c.listed, catalog.TierBatch, now)
	if !ok {
		return choice{}, false
	}
	c.tier, c.price, c.borrowed = catalog.TierBatch, p, true
	return c, true
}

// Pick returns up to MaxCandidates offerings for the request, in the order to try them.
//
// Candidates serve the model, are offered (active, their rig active, both asks within the tier's price in force
// now), sit in the request's tier, are under its caps, are healthy (a heartbeat from their own provider within
// HeartbeatTimeout) and their circuit is not open; a half-open one is returned to one request at a time. Each
// place goes to the cheapest remaining blended ask, except that among near-equals, blended asks within 5% of it,
// two are drawn at random and the one with the shorter expected wait wins (the power of two choices): P50 time
// to first token times (1 + load / capacity). Rigs at capacity come after those with room, cheapest first among them too. A
// request that prefers carbon passes the same filters and is ordered by estimated carbon instead (carbon.go).
// Above every other rule of order, the offerings below 95% uptime come after the others, and those below 80% last
// (reliability.go).
//
// The request's provider preferences (preferences.go) pass the candidates through their own filters after the
// caps, and may order them: an explicit sort instead of the ask, and the offerings an order names first, entry
// by entry, each entry's by the rules above. Without an order or a sort, the offering that last served the request's
// conversation goes first while it may (sticky.go). Without fallbacks, only the first candidate is returned, or
// with an order only the offerings it names.
//
// It fails with a *services.Error whose Cause is one of the Err values above, naming the first rule that left
// no offering: the model, the pin, the names the preferences give, the tier, the caps, the preferences' filters,
// then health and circuits. A model, or a pinned offering,
// whose rigs are all pending or offline is unavailable (503), not unknown: it is listed, and may qualify soon.
func (r *Router) Pick(req Request) ([]Candidate, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	tier := cmp.Or(req.Tier, catalog.TierStandard)
	snap := r.snap.Load()
	if snap == nil {
		return nil, &services.Error{Code: services.CodeUnavailable, Message: "The gateway is starting; retry in a moment.", Cause: ErrNotLoaded}
	}
	now := r.cfg.Now()

	var cs, idle []choice
	var unqualified []string // offerings of the model whose rig is pending or offline
	for _, l := range snap.byModel[req.Model] {
		if !l.qualified() {
			unqualified = append(unqualified, l.ID)
			continue
		}
		c := choice{listed: l, v: l.state.view(now), standing: r.standing(l.ID)}
		c.tier = cmp.Or(c.v.tier, l.Tier)
		var ok bool
		if c.price, ok = snap.offered(l, c.tier, now); ok {
			cs = append(cs, c)
		}
		if b, ok := snap.idleForBatch(c, tier, now); ok && req.Offering == "" {
			idle = append(idle, b)
		}
	}
	if len(cs) == 0 && len(unqualified) > 0 {
		return nil, &services.Error{Code: services.CodeUnavailable, Cause: ErrUnavailable,
			Message: fmt.Sprintf("No rig serving %s is ready to take requests yet; retry later.", req.Model)}
	}
	if len(cs) == 0 {
		return nil, &services.Error{Code: services.CodeNotFound, Cause: ErrUnknownModel,
			Message: fmt.Sprintf("The model %q does not exist or is not on offer; GET /v1/models lists the models on offer.", req.Model)}
	}
	if req.Offering != "" {
		if cs = slices.DeleteFunc(cs, func(c choice) bool { return c.ID != req.Offering }); len(cs) == 0 && slices.Contains(unqualified, req.Offering) {
			return nil, &services.Error{Code: services.CodeUnavailable, Cause: ErrUnavailable,
				Message: fmt.Sprintf("Offering %q is not taking requests yet; retry later, or pin none.", req.Offering)}
		}
		if len(cs) == 0 {
			return nil, &services.Error{Code: services.CodeNotFound, Cause: ErrUnknownOffering,
				Message: fmt.Sprintf("Offering %q does not serve %q; pin an offering of this model from the catalog, or none.", req.Offering, req.Model)}
		}
	}
	prefs := req.Preferences
	if prefs != nil {
		if err := prefs.resolve(req.Model, snap.byModel[req.Model]); err != nil {
			return nil, err
		}
	}
	tiers := tiersOf(cs)
	cs = slices.DeleteFunc(cs, func(c choice) bool { return c.tier != tier })
	cs = append(cs, idle...)
	if len(cs) == 0 {
		msg := fmt.Sprintf("%s is not offered in the %s tier; it is offered in %s: ask for %s:%s.", req.Model, tier, joinTiers(tiers), req.Model, tiers[0])
		if req.Offering != "" {
			msg = fmt.Sprintf("Offering %q serves %s in the %s tier, not %s: ask for %s:%s.", req.Offering, req.Model, tiers[0], tier, req.Model, tiers[0])
		}
		return nil, &services.Error{Code: services.CodeUnavailable, Cause: ErrTierNotOffered, Message: msg}
	}
	for i := range cs {
		cs[i].estimate()
		cs[i].estimateCarbon()
	}
	if cs = slices.DeleteFunc(cs, func(c choice) bool { return !req.admits(c) }); len(cs) == 0 {
		return nil, &services.Error{Code: services.CodeUnavailable, Cause: ErrOverCaps,
			Message: fmt.Sprintf("No offering of %s in the %s tier meets %s; raise the cap or choose another tier.", req.Model, tier, req.caps())}
	}
	if prefs != nil {
		var err error
		if cs, err = prefs.filter(req.Model, tier, cs); err != nil {
			return nil, err
		}
	}
	cs = slices.DeleteFunc(cs, func(c choice) bool {
		return !c.v.healthy || c.v.provider != c.ProviderAccountID || c.v.circuit == circuitOpen
	})
	rk := rankingFor(req)
	var out []Candidate
	switch {
	case prefs != nil && len(prefs.Order) > 0:
		// The offerings each entry of the order names, entry by entry, then (with fallbacks) the others.
		for _, e := range prefs.Order {
			named := slices.DeleteFunc(slices.Clone(cs), func(c choice) bool { return !c.names(e) })
			cs = slices.DeleteFunc(cs, func(c choice) bool { return c.names(e) })
			out = r.rank(out, named, now, rk)
		}
		if !prefs.NoFallbacks {
			out = r.rank(out, cs, now, rk)
		}
	default:
		if req.Conversation != "" && !req.ConversationStarts && req.Offering == "" && (prefs == nil || prefs.Sort == "") {
			if i := r.stickyChoice(cs, req.Conversation, now); i >= 0 {
				out = append(out, cs[i].candidate())
				cs = slices.Delete(cs, i, i+1)
			}
		}
		out = r.rank(out, cs, now, rk)
		if prefs != nil && prefs.NoFallbacks {
			out = out[:min(len(out), 1)]
		}
	}
	if len(out) == 0 {
		return nil, &services.Error{Code: services.CodeUnavailable, Cause: ErrUnavailable,
			Message: fmt.Sprintf("No offering of %s in the %s tier can take the request right now; retry shortly.", req.Model, tier)}
	}
	return out, nil
}

// estimate fills in the figures routing goes by: live when the window holds enough, else the catalog's.
func (c *choice) estimate() {
	f := c.v.figures
	if f.Requests >= catalog.MinMeasuredRequests {
		c.p99 = f.TTFTP99Ms
	} else if p := c.TTFTP99Ms(); p != nil {
		c.p99 = *p
	}
	switch {
	case f.Requests >= minLiveSamples:
		c.p50 = f.TTFTP50Ms
	case c.Measured() && c.MeasuredTTFTP50Ms != nil:
		c.p50 = *c.MeasuredTTFTP50Ms
	case c.ClaimedTTFTP50Ms != nil:
		c.p50 = *c.ClaimedTTFTP50Ms
	case c.p99 > 0:
		c.p50 = c.p99
	case c.tier == catalog.TierRealtime:
		c.p50 = catalog.RealtimeMaxP99Ms
	case c.tier == catalog.TierStandard:
		c.p50 = catalog.StandardMaxP99Ms
	default:
		c.p50 = unknownBatchTTFTMs
	}
	if f.Requests >= catalog.MinMeasuredRequests && f.TokensPerSec > 0 {
		c.tps = f.TokensPerSec
	} else if t := c.TokensPerSec(); t != nil {
		c.tps = *t
	}
	c.saturated = c.v.capacity > 0 && c.v.load >= c.v.capacity
}

// wait is the expected time to first token: P50, longer the more loaded the rig.
func (c *choice) wait() float64 {
	return c.p50 * (1 + float64(c.v.load)/float64(max(c.v.capacity, 1)))
}

func (req Request) admits(c choice) bool {
	if req.MaxPricePerMTok > 0 && c.askSum() > 2*int64(req.MaxPricePerMTok) {
		return false
	}
	return req.MaxTTFTMillis <= 0 || (c.p99 > 0 && c.p99 <= req.MaxTTFTMillis)
}

func (req Request) caps() string {
	var caps []string
	if req.MaxPricePerMTok > 0 {
		caps = append(caps, "max_price_per_mtok "+req.MaxPricePerMTok.Decimal())
	}
	if req.MaxTTFTMillis > 0 {
		caps = append(caps, fmt.Sprintf("max_ttft_ms %g", req.MaxTTFTMillis))
	}
	return strings.Join(caps, " and ")
}

// ranking is how candidates of one standing are ordered: cmp sorts them, and draw says whether the place goes to
// the faster of two near-equals drawn at random (the power of two choices).
type ranking struct {
	cmp  func(a, b choice) int
	draw bool
}

// rankingFor is the request's ranking: an explicit sort strictly by its figure (preferences.go), else carbon
// for a request that prefers it (byCarbon), else the blended ask with a draw among near-equals (byAsk).
func rankingFor(req Request) ranking {
	switch {
	case req.Preferences != nil && req.Preferences.Sort != "":
		return ranking{cmp: bySort(req.Preferences.Sort)}
	case req.PreferCarbon:
		return ranking{cmp: byCarbon}
	}
	return ranking{cmp: byAsk, draw: true}
}

// rank appends the candidates to out in routing's order: by uptime first (reliability.go); within a standing, by
// the ranking, a rig of a faster tier lending an idle slot after every batch rig.
func (r *Router) rank(out []Candidate, cs []choice, now time.Time, rk ranking) []Candidate {
	for _, group := range byStanding(cs) {
		borrowed := slices.DeleteFunc(slices.Clone(group), func(c choice) bool { return !c.borrowed })
		group = slices.DeleteFunc(group, func(c choice) bool { return c.borrowed })
		out = r.order(out, group, now, rk)
		out = r.order(out, borrowed, now, rk)
	}
	return out
}

// stickyChoice is the index among cs of the offering that last served the conversation, when it may go first:
// it is among the candidates, its circuit closed, with room, and it stands by its uptime as well as the best of
// them; -1 otherwise (sticky.go).
func (r *Router) stickyChoice(cs []choice, conversation string, now time.Time) int {
	id := r.conversations.lookup(conversation, now)
	if id == "" {
		return -1
	}
	i := slices.IndexFunc(cs, func(c choice) bool { return c.ID == id })
	if i < 0 || cs[i].saturated || cs[i].v.circuit != circuitClosed {
		return -1
	}
	if slices.ContainsFunc(cs, func(c choice) bool { return c.standing < cs[i].standing }) {
		return -1
	}
	return i
}

// order ranks the candidates (see Pick) and appends to out those it may hand out, until out holds
// MaxCandidates.
func (r *Router) order(out []Candidate, cs []choice, now time.Time, rk ranking) []Candidate {
	slices.SortFunc(cs, rk.cmp)
	for len(out) < MaxCandidates && len(cs) > 0 {
		k := 0
		if g := nearEquals(cs); g > 1 && rk.draw {
			i, j := r.intn(g), r.intn(g-1)
			if j >= i {
				j++
			}
			k = i
			if wj, wi := cs[j].wait(), cs[i].wait(); wj < wi || (wj == wi && j < i) {
				k = j
			}
		}
		c := cs[k]
		cs = slices.Delete(cs, k, k+1)
		if c.v.circuit == circuitHalfOpen && !c.state.reserveTrial(now) {
			continue
		}
		out = append(out, c.candidate())
	}
	return out
}

// candidate is the choice as Pick hands it out.
func (c choice) candidate() Candidate {
	return Candidate{
		OfferingID: c.ID, ProviderID: c.ProviderAccountID, Model: c.Model, Tier: c.tier,
		AskInput: c.AskInput, AskOutput: c.AskOutput, PriceID: c.price.ID, PriceInput: c.price.Input, PriceOutput: c.price.Output,
		PriceCachedInput: c.price.CachedInput,
		GPUName:          c.GPUName, GPUCount: c.GPUCount, TTFTP50Ms: c.p50, TTFTP99Ms: c.p99, InFlight: c.v.load, Capacity: c.v.capacity,
		GCO2ePerToken: c.gco2ePerToken, Native: c.v.native,
	}
}

// byAsk orders candidates with room before saturated ones, then by blended ask, cheapest first, then id.
func byAsk(a, b choice) int {
	if a.saturated != b.saturated {
		if a.saturated {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.askSum(), b.askSum()), strings.Compare(a.ID, b.ID))
}

// nearEquals is how many of the sorted candidates, from the first, are near-equals of it: as full or free as
// it, and asking at most nearEqualPercent more, blended.
func nearEquals(cs []choice) int {
	g := 1
	for g < len(cs) && cs[g].saturated == cs[0].saturated && cs[g].askSum()*100 <= cs[0].askSum()*(100+nearEqualPercent) {
		g++
	}
	return g
}

// tiersOf lists the tiers the choices sit in, in catalog.Tiers order.
func tiersOf(cs []choice) []catalog.Tier {
	var out []catalog.Tier
	for _, t := range catalog.Tiers {
		if slices.ContainsFunc(cs, func(c choice) bool { return c.tier == t }) {
			out = append(out, t)
		}
	}
	return out
}

func joinTiers(ts []catalog.Tier) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, " and ")
}
