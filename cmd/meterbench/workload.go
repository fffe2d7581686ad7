package main

import (
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"
)

// workload is what the publisher needs to build the events: where to publish, the ticket key,
// and the customers and offerings the events are spread over. The parent process hands it to
// the publisher on its standard input.
type workload struct {
	NATSURL   string `json:"nats_url"`
	TicketKey []byte `json:"ticket_key"`
	Events    int    `json:"events"`
	Rate      int    `json:"rate"` // events per second to publish; 0 for as fast as possible
	// From is the index of the first event: a round publishes events From to From+Events-1.
	From      int        `json:"from"`
	Customers []string   `json:"customers"`
	APIKeys   []string   `json:"api_keys"` // the i-th customer's
	Offerings []offering `json:"offerings"`
	// IDsFrom is the millisecond (Unix) the event and request ids' time starts at.
	IDsFrom int64 `json:"ids_from"`
}

// offering is one rig's offering as the workload uses it, with the terms its tickets carry: the
// asks and the price version of its tier in force at routing.
type offering struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Tier     string `json:"tier"`
	Model    string `json:"model"`
	AskIn    int64  `json:"ask_in"`  // micro-dollars per million input tokens
	AskOut   int64  `json:"ask_out"` // micro-dollars per million output tokens
	PriceID  int64  `json:"price_id"`
}

// tierPrices are the price book the benchmark's database holds, in micro-dollars per million
// tokens, in force since well before the run.
var tierPrices = map[string]struct{ in, out int64 }{
	"realtime": {300_000, 600_000},
	"standard": {150_000, 300_000},
	"batch":    {50_000, 100_000},
}

// maxOutputTokens is the max_tokens of every request of the workload, which its tickets carry
// as their output bound; the workload's requests produce fewer.
const maxOutputTokens = 64

// Event i of the workload: its ids, whom it bills and what it used. Every 50th request
// produced no completion token and is charged nothing (docs/failure-cases.md, case 18).
//
// The ids have the shape agents and the gateway give them (services.NewTimeOrderedID): a
// millisecond, then 80 bits that look random, here derived from i so that both processes
// know them. They advance a millisecond every 50 events, as ids made at 50,000 requests a
// second do, so the unique indexes see the inserts they see in production: near their right
// edge, in no particular order within a millisecond.
func (w *workload) eventID(i int) string   { return w.id("evt_", i, 0x9e3779b97f4a7c15) }
func (w *workload) requestID(i int) string { return w.id("req_", i, 0xc2b2ae3d27d4eb4f) }

func (w *workload) id(prefix string, i int, salt uint64) string {
	ms := w.IDsFrom + int64(i/50)
	r := splitmix64(uint64(i) ^ salt)
	return fmt.Sprintf("%s%012x%016x%04x", prefix, ms&(1<<48-1), r, splitmix64(r)&0xffff)
}

// splitmix64 is a bijective mixer of 64-bit values (Steele, Lea and Flood's SplitMix64).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
func (w *workload) customer(i int) string { return w.Customers[i%len(w.Customers)] }
func (w *workload) apiKey(i int) string   { return w.APIKeys[i%len(w.Customers)] }
func (w *workload) offering(i int) offering {
	return w.Offerings[(i/len(w.Customers))%len(w.Offerings)]
}

func (w *workload) usage(i int, ticket string) usage.Usage {
	off := w.offering(i)
	return usage.Usage{
		RequestID: w.requestID(i), Ticket: ticket, OfferingID: off.ID, Model: off.Model,
		InputTokens: int64(50 + i%2000), OutputTokens: int64(i % 50),
		TTFTMillis: 120, DurationMillis: 850 + float64(i%400), EnergyJoules: 40 + float64(i%100)/4,
		EnergySource: usage.EnergyEstimated, Status: usage.StatusOK,
	}
}

// expected is what metering the whole workload must bill, worked out here from the workload
// alone, not from anything the meter wrote.
func (w *workload) expected() (charge, payable int64) {
	for i := w.From; i < w.From+w.Events; i++ {
		u, off := w.usage(i, ""), w.offering(i)
		if u.OutputTokens == 0 {
			continue
		}
		p := tierPrices[off.Tier]
		charge += u.InputTokens*p.in + u.OutputTokens*p.out
		payable += u.InputTokens*off.AskIn + u.OutputTokens*off.AskOut
	}
	return charge, payable
}

// stampLayout is how the publisher writes an event's time: fixed width, so that it can stamp
// a prepared event in place at the moment it publishes it.
const stampLayout = "2006-01-02T15:04:05.000000Z"

// placeholderTime is the time prepared events carry until they are stamped; its encoding has
// the width of stampLayout.
var placeholderTime = time.Date(2001, 2, 3, 4, 5, 6, 789012000, time.UTC)
