package history

import (
	"math"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// The rules of the history, all in one place: who calls what, how many times a day and when,
// what each customer buys, which requests fail, the refund and the price change. Everything
// the history makes follows from these rules, the date and what the database holds; see
// docs/demo-history.md.

// Days is how many whole UTC days before today the history holds at least; it starts on the
// first of the previous month when that is earlier, so that the previous month is whole.
const Days = 60

// firstDay is the history's first day, seen from today (midnight UTC).
func firstDay(today time.Time) time.Time {
	days, month := today.AddDate(0, 0, -Days), time.Date(today.Year(), today.Month()-1, 1, 0, 0, 0, 0, time.UTC)
	if month.Before(days) {
		return month
	}
	return days
}

// Volumes and times of a day.
const (
	// swellDays and swellShare: each workload's requests a day rise and fall by swellShare
	// over a period of swellDays, so that the charts show a trend besides the week.
	swellDays  = 45
	swellShare = 0.15
	// jitterShare: a day's count is drawn within this share of its workload's count.
	jitterShare = 0.15
	// lastStartHour: no request starts at or after this hour (UTC), so that every one has
	// ended, and every credit move has happened, before the day's meter run at meterAt.
	lastStartHour = 23
	// meterAt is when, in each day, the history's meter meters that day's events: one batch,
	// and one ledger transaction per customer, dated that day.
	meterAt = 23*time.Hour + 59*time.Minute
	// buyAt is when a customer that buys credit on a day does it (UTC); the checkout
	// completes checkoutTakes later.
	buyAt         = 6*time.Hour + 40*time.Minute
	checkoutTakes = 45 * time.Second
	// refundAt is when, on its day, a refund is made (UTC).
	refundAt = 14*time.Hour + 10*time.Minute
)

// How a request travels, in time and bytes.
const (
	// agentLag is how long after the gateway signs a request's ticket its rig's agent has it;
	// relayLag how long after the agent the gateway has the last byte; storedLag how long
	// after the request ended the usage stream stored its event.
	agentLag  = 3 * time.Millisecond
	relayLag  = time.Millisecond
	storedLag = 20 * time.Millisecond
	// bytesPerToken is how many bytes of text a token is taken for, in prompts and answers
	// (English text with the tokenizers served here); bodyOverhead is the JSON around a chat
	// request's prompt, and responseOverhead around a whole (not streamed) answer.
	bytesPerToken    = 4
	bodyOverhead     = 160
	responseOverhead = 320
)

// burstSize is how many requests of a workload come together, at the benchmark's rate (see requestsOf).
const burstSize = 8

// concurrency is how many requests a rig of a tier serves at once while serving the history's:
// what its latencies are drawn at (simulation.Model) and what its energy is shared among.
var concurrency = map[catalog.Tier]int{catalog.TierRealtime: 2, catalog.TierStandard: 4, catalog.TierBatch: 8}

// measuredDraw is the share of board power a data-centre rig's sampler reads while it serves
// the history's traffic: an H100 PCIe serving a moderate batch draws about three quarters of
// its rated 350 W.
const measuredDraw = 0.75

// Failures.
const (
	// failoverEvery: on every failoverEvery-th day (counted from 1970-01-01), the day's first
	// request of every workload with a second offering to try fails over: its first choice
	// answers 503 before any byte, and the second serves it.
	failoverEvery = 10
	failedAfter   = 60 * time.Millisecond // how long the failing rig takes to answer 503
	// cancelEvery: on every cancelEvery-th day, each customer's first streamed request of the
	// day is canceled by its client once cancelShare of its answer has been relayed.
	cancelEvery = 12
	cancelShare = 0.4
	// overReporter's rig over-reports once in the history: on the first day of the month
	// before today's, its first streamed request that neither fails over nor is
	// canceled is reported by its rig with overReportFactor times its max_tokens as output.
	// The meter bills no more than the bounds and flags it with the excess: the one real flag
	// of the demo's documents, which finance resolves on /finance/flags.
	overReporter     = "studio@example.com"
	overReportFactor = 4
)

// priceChange is the change of the price book the history holds: the standard tier's price cut
// from the default $0.15 / $0.30 to $0.12 / $0.24 per million input / output tokens, effective
// priceChangeDaysAgo days before today (later only where the tier has usage metered since:
// ensurePriceChange), scheduled by finance (financeEmail) priceChangeNotice ahead. Every demo
// offering the tier's default prices asks less than the new price, so the cut changes no
// listing; the models with a standard price of their own (demo.ModelPrices) keep it.
var priceChange = catalog.Price{Tier: catalog.TierStandard, Input: 120_000, Output: 240_000}

const (
	priceChangeDaysAgo = 30
	priceChangeNotice  = 14 * 24 * time.Hour
	financeEmail       = "finance@example.com"
)

// Workload is one kind of request a customer makes, with the API key it calls with.
type Workload struct {
	Key   string // the API key's name
	Tier  catalog.Tier
	Model string
	// Weekday and Weekend are its requests a day, Monday to Friday and on Saturday and
	// Sunday, before the swell and the jitter.
	Weekday, Weekend int
	// From and To are the UTC hours its requests start in, [From, To), most of them in the
	// middle.
	From, To int
	// Prompt is its mean prompt in tokens; 0 takes the mean of the model's benchmark runs
	// (ShareGPT prompts). Prompts are drawn between half and one and a half times it.
	Prompt int64
	// MaxTokens is the max_tokens it sets; 0 sets none.
	MaxTokens int64
	Stream    bool
}

// Customer is a demo customer account the history makes traffic for, and how it buys credit.
type Customer struct {
	Email     string
	Workloads []Workload
	// On a weekday that opens with less than TopUpBelow of credit, or on any day that opens
	// with none, the customer buys TopUpCents at buyAt; with Once, only while it has never
	// bought any.
	TopUpBelow money.Pico
	TopUpCents int64
	Once       bool
	// RefundCents of the customer's first purchase in the history are refunded
	// RefundAfterDays after it; 0: no refund.
	RefundCents     int64
	RefundAfterDays int
}

// Customers are the history's customers. Acme Labs runs a support agent and a code reviewer on
// realtime, a chat on standard and nightly evaluations on batch, and had $8 of its first $20
// refunded; Brightline Studio, a small team, an app on standard and transcripts on batch;
// Juniper Tutoring a tutor on realtime, on one purchase of $5 that was refunded in full after
// part of it was spent: its balance is below zero, the amount it owes, and the gateway refuses
// its requests since (docs/failure-cases.md, case 19).
var Customers = []Customer{
	{
		Email: "developer@example.com",
		Workloads: []Workload{
			{Key: "Support agent", Tier: catalog.TierRealtime, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
				Weekday: 30, Weekend: 6, From: 7, To: 19, Prompt: 12_000, MaxTokens: 1024, Stream: true},
			{Key: "Code review", Tier: catalog.TierRealtime, Model: "microsoft/phi-4",
				Weekday: 12, Weekend: 2, From: 8, To: 18, Prompt: 6_000, MaxTokens: 2048, Stream: true},
			{Key: "Chat", Tier: catalog.TierStandard, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
				Weekday: 24, Weekend: 10, From: 6, To: 23, Stream: true},
			{Key: "Nightly evals", Tier: catalog.TierBatch, Model: "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
				Weekday: 18, Weekend: 18, From: 1, To: 4, Prompt: 40_000, MaxTokens: 512},
		},
		TopUpBelow: 4 * money.PicoPerUSD, TopUpCents: 2000,
		RefundCents: 800, RefundAfterDays: 3,
	},
	{
		Email: "studio@example.com",
		Workloads: []Workload{
			{Key: "Brightline app", Tier: catalog.TierStandard, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
				Weekday: 15, Weekend: 3, From: 8, To: 20, Prompt: 1_500, MaxTokens: 512, Stream: true},
			{Key: "Transcripts", Tier: catalog.TierBatch, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
				Weekday: 10, Weekend: 0, From: 18, To: 23, Prompt: 30_000, MaxTokens: 1024},
		},
		TopUpBelow: 3 * money.PicoPerUSD, TopUpCents: 1000,
	},
	{
		Email: "tutor@example.com",
		Workloads: []Workload{
			{Key: "Tutor bot", Tier: catalog.TierRealtime, Model: "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
				Weekday: 20, Weekend: 8, From: 14, To: 22, Prompt: 20_000, MaxTokens: 512, Stream: true},
		},
		TopUpCents: 500, Once: true,
		RefundCents: 500, RefundAfterDays: 24,
	},
}

// dayNumber counts UTC days from 1970-01-01: what the rhythm and the failures follow, so that
// a day's traffic depends on its date, not on when the history is seeded.
func dayNumber(day time.Time) int64 { return day.Unix() / 86400 }

// weekend reports whether the day is a Saturday or a Sunday.
func weekend(day time.Time) bool {
	wd := day.Weekday()
	return wd == time.Saturday || wd == time.Sunday
}

// requestsOn is how many requests the workload makes on the day, for a draw u in [0, 1).
func (w Workload) requestsOn(day time.Time, u float64) int {
	base := w.Weekday
	if weekend(day) {
		base = w.Weekend
	}
	swell := 1 + swellShare*math.Sin(2*math.Pi*float64(dayNumber(day))/swellDays)
	jitter := 1 + jitterShare*(2*u-1)
	return int(math.Round(float64(base) * swell * jitter))
}

// lastStart is the latest a request of the workload starts on the day: just before the end of its hours.
func (w Workload) lastStart(day time.Time) time.Time {
	return day.Add(time.Duration(min(w.To, lastStartHour))*time.Hour - time.Millisecond)
}

// startIn is when in the day a request of the workload starts, for draws u1 and u2 in [0, 1):
// within [From, To), most likely in the middle (the mean of two uniform draws).
func (w Workload) startIn(day time.Time, u1, u2 float64) time.Time {
	from, to := time.Duration(w.From)*time.Hour, time.Duration(min(w.To, lastStartHour))*time.Hour
	return day.Add(from + time.Duration((u1+u2)/2*float64(to-from)))
}

// failsOverOn reports whether the day's first request of a workload with a second offering
// fails over; cancelsOn whether a customer's first streamed request is canceled.
func failsOverOn(day time.Time) bool { return dayNumber(day)%failoverEvery == 0 }
func cancelsOn(day time.Time) bool   { return dayNumber(day)%cancelEvery == 0 }
