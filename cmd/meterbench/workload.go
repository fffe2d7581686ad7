package main

import (
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/metering"
)

// workload is what the publisher needs to build the events: where to publish, the ticket key,
// and the customers and offerings the events are spread over. The parent process hands it to
// the publisher on its standard input.
type workload struct {
	NATSURL   string     `json:"nats_url"`
	TicketKey []byte     `json:"ticket_key"`
	Events    int        `json:"events"`
	Rate      int        `json:"rate"` // events per second to publish; 0 for as fast as possible
	Customers []string   `json:"customers"`
	Offerings []offering `json:"offerings"`
}

// offering is one rig's offering as the workload uses it.
type offering struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Tier     string `json:"tier"`
	Model    string `json:"model"`
	Ask      int64  `json:"ask"` // micro-dollars per million tokens
}

// tierPrices are the price book the benchmark's database holds, in micro-dollars per million
// tokens, in force since well before the run.
var tierPrices = map[string]struct{ in, out int64 }{
	"realtime": {300_000, 600_000},
	"standard": {150_000, 300_000},
	"batch":    {50_000, 100_000},
}

// Event i of the workload: its ids, whom it bills and what it used. Every 50th request
// produced no completion token and is charged nothing (FIELD-CASES 20).
func (w *workload) eventID(i int) string   { return fmt.Sprintf("evt-%08d", i) }
func (w *workload) requestID(i int) string { return fmt.Sprintf("req-%08d", i) }
func (w *workload) customer(i int) string  { return w.Customers[i%len(w.Customers)] }
func (w *workload) offering(i int) offering {
	return w.Offerings[(i/len(w.Customers))%len(w.Offerings)]
}

func (w *workload) usage(i int, ticket string) metering.Usage {
	off := w.offering(i)
	return metering.Usage{
		RequestID: w.requestID(i), Ticket: ticket, OfferingID: off.ID, Model: off.Model,
		InputTokens: int64(50 + i%2000), OutputTokens: int64(i % 50),
		TTFTMillis: 120, DurationMillis: 850 + float64(i%400), EnergyJoules: 40 + float64(i%100)/4,
		EnergySource: metering.EnergyEstimated, Status: metering.StatusOK,
	}
}

// expected is what metering the whole workload must bill, worked out here from the workload
// alone, not from anything the meter wrote.
func (w *workload) expected() (charge, payable int64) {
	for i := range w.Events {
		u, off := w.usage(i, ""), w.offering(i)
		if u.OutputTokens == 0 {
			continue
		}
		p := tierPrices[off.Tier]
		charge += u.InputTokens*p.in + u.OutputTokens*p.out
		payable += (u.InputTokens + u.OutputTokens) * off.Ask
	}
	return charge, payable
}

// stampLayout is how the publisher writes an event's time: fixed width, so that it can stamp
// a prepared event in place at the moment it publishes it.
const stampLayout = "2006-01-02T15:04:05.000000Z"

// placeholderTime is the time prepared events carry until they are stamped; its encoding has
// the width of stampLayout.
var placeholderTime = time.Date(2001, 2, 3, 4, 5, 6, 789012000, time.UTC)
