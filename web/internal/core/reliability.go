package core

import (
	"fmt"
	"strconv"

	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/reliability"
	"github.com/gpumarket/gpumarket/templates"
)

// The reliability record (docs/reliability.md) on the public catalog, its API, and the provider's performance
// Page: each reads an offering's record through recordOf and writes it through reliabilityCell, so that the
// pages cannot disagree.

// Records gives each offering's reliability record; *reliability.Board implements it.
type Records interface {
	Record(offeringID string) reliability.Record
}

var _ Records = (*reliability.Board)(nil)

// RecordOf is the offering's record; an empty one, not enough traffic yet, where no board runs.
func (s *Core) RecordOf(offeringID string) reliability.Record {
	if s.Reliability == nil {
		return reliability.RecordOf(reliability.Counts{}, reliability.Window{})
	}
	return s.Reliability.Record(offeringID)
}

// WithRecords fills in the record of every offering of the sections.
func (s *Core) WithRecords(sections []templates.TierSection) []templates.TierSection {
	for i := range sections {
		for j := range sections[i].Offerings {
			o := &sections[i].Offerings[j]
			o.Reliability = ReliabilityCell(s.RecordOf(o.ID))
		}
	}
	return sections
}

// ReliabilityCell writes a record as the pages show it.
func ReliabilityCell(r reliability.Record) templates.ReliabilityCell {
	c := templates.ReliabilityCell{
		UptimeBasis: notYet(r.Requests, "requests in the last day"),
		TTFTBasis:   notYet(r.TTFTRequests, "streamed requests in the last 30 minutes"),
		TPSBasis:    notYet(r.TPSRequests, "streamed requests in the last 30 minutes"),
	}
	if r.UptimePercent != nil {
		c.Uptime = strconv.FormatFloat(*r.UptimePercent, 'f', 2, 64) + "%"
		c.UptimeBasis = "over " + money.Counted(int64(r.Requests), "request", "requests") + " in the last day"
	}
	if r.RateLimited > 0 {
		c.UptimeBasis += fmt.Sprintf(", %d rate limited", r.RateLimited)
	}
	switch r.Standing {
	case reliability.Degraded.String():
		c.Routing = fmt.Sprintf("below %d%%: tried after the others", reliability.PreferredPercent)
	case reliability.Fallback.String():
		c.Routing = fmt.Sprintf("below %d%%: tried only when no other can serve", reliability.FallbackPercent)
	}
	if p := r.TTFTMs; p != nil {
		c.TTFT = "P50 " + FormatMs(p.P50) + " · P90 " + FormatMs(p.P90) + " · P99 " + FormatMs(p.P99)
		c.TTFTBasis = fmt.Sprintf("over %d streamed requests in the last 30 minutes", r.TTFTRequests)
	}
	if p := r.OutputTokensPerSec; p != nil {
		c.TPS = "P50 " + tokensPerSec(p.P50) + " · P90 " + tokensPerSec(p.P90) + " · P99 " + tokensPerSec(p.P99) + " tokens/s"
		c.TPSBasis = fmt.Sprintf("over %d streamed requests in the last 30 minutes", r.TPSRequests)
	}
	return c
}

// notYet says how far a figure is from the warm-up.
func notYet(n int64, what string) string {
	return fmt.Sprintf("not enough traffic yet: %d of %d %s", n, reliability.WarmUp, what)
}

func tokensPerSec(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// PublishedRecord is the offering's record as the public catalog's API gives it.
func (s *Core) PublishedRecord(offeringID string) *reliability.Record {
	r := s.RecordOf(offeringID)
	return &r
}
