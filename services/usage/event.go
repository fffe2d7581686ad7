// Package usage owns the usage event: the contract by which an inference backend (the
// provider's gpuagent) tells the platform what one request used, and the rules that decide
// whether the meter (package metering) may bill it. CONTRACT.md beside this file is the
// contract in prose; the code is the contract in code, and the tests hold the two together:
// event.go has the types, decode.go and decode_plain.go the decoders, validate.go the rules.
// EnsureStreams sets up the JetStream stream the events travel on.
//
// Both sides import this package: the agent to write events, the meter to judge them. It
// depends on nothing of the platform's but route tickets (package ticket) and the NATS names
// (package events), so the agent links no database or ledger code.
//
// Invariants this package keeps:
//   - Decode accepts only one strict shape: CloudEvents 1.0 structured JSON of type
//     gpumarket.usage.v1, at most MaxEventBytes, UTF-8, no duplicate member names, member names
//     matched exactly, no unknown data fields. Envelope extension attributes are allowed, as
//     CloudEvents requires, and ignored.
//   - Validate refuses an event whose fields are out of bounds, whose data names another
//     offering than its NATS subject, or whose time is too far in the future or older than the
//     stream keeps messages; VerifyTicket refuses one without a valid route ticket for its
//     offering and request. Every refusal is a *Rejection with a reason from a fixed list, so
//     the meter can keep it for review and keep the stream flowing.
//   - Nothing here prices: an event carries counts, times and energy, never money.
//
// Exactly once is the meter's job, built on two facts this contract fixes: an event keeps its
// id across every re-send (the NATS Nats-Msg-Id header is that id), and one request id is
// billed at most once, whatever event carries it.
package usage

import (
	"time"

	"github.com/gpumarket/gpumarket/services/events"
)

// The fixed attributes of every usage event. Its NATS subject is events.UsageSubject.
const (
	SpecVersion     = "1.0"                // CloudEvents specification version
	EventType       = "gpumarket.usage.v1" // CloudEvents type; a breaking change gets a new version
	DataContentType = "application/json"   // data is a JSON object, never data_base64
	HeaderMsgID     = "Nats-Msg-Id"        // NATS header carrying the event id, for the stream's dedupe
	sourcePrefix    = "gpuagent/"          // source: gpuagent/<provider_id>/<offering_id>
)

// Bounds of an acceptable event.
const (
	// MaxEventBytes bounds an encoded event. The largest event Validate passes (every id at
	// MaxIDLength, a ticket of ticket.MaxLength, a model of MaxModelLength four-byte runes,
	// the longest numbers) encodes to under 4 KiB (TestLargestEventFits); 8 KiB leaves room
	// for indentation, escapes and a few extension attributes (a traceparent), and still
	// bounds what one fetched batch and one stored rejection weigh. The stream's max message
	// size is set to it.
	MaxEventBytes = 8 << 10

	// MaxEventAge is the oldest an event may be when the meter judges it, and the stream's
	// max age: an event the stream would already have discarded is not billed either. An
	// agent that held an event in its outbox longer than this sees it rejected as stale.
	MaxEventAge = 7 * 24 * time.Hour

	// MaxTicketAge is the oldest a route ticket may be when the meter bills an event under it:
	// the longest an event may wait in an agent's outbox, MaxEventAge, plus a day for the
	// longest request. Past it no event of the request is billed any more, so admission holds
	// an unmetered request's bound this long (admission.Admission).
	MaxTicketAge = MaxEventAge + 24*time.Hour

	// MaxClockSkew is how far an agent's clock may be off the platform's: an event may be
	// stamped up to this far in the future, and a request may appear to start up to this long
	// before its ticket was issued.
	MaxClockSkew = 5 * time.Minute

	MaxIDLength    = events.MaxIDLength // event id, request id, provider id, offering id (bytes, ASCII)
	MaxModelLength = 200                // model name, in characters, as the offerings table allows
	MaxTokens      = 10_000_000         // input or output tokens of one request

	// MaxDurationMillis bounds a request's duration and time to first token: the batch
	// tier's promise is 24 hours, and no single request runs longer.
	MaxDurationMillis = 24 * 60 * 60 * 1000

	// MaxEnergyJoules bounds one request's energy: eight 1 kW GPUs for 24 hours is 6.9e8 J.
	MaxEnergyJoules = 1e9
)

// EnergySource says how the energy figure was obtained.
type EnergySource string

const (
	EnergyMeasured  EnergySource = "measured"  // from GPU power samples over the request
	EnergySimulated EnergySource = "simulated" // from a simulated power sensor (the demo's rigs): never counted as measured
	EnergyEstimated EnergySource = "estimated" // from board power times GPU count over the request's share of the rig
)

// Valid says whether s is one of the three sources.
func (s EnergySource) Valid() bool {
	return s == EnergyMeasured || s == EnergySimulated || s == EnergyEstimated
}

// Status is how the request ended.
type Status string

const (
	StatusOK       Status = "ok"
	StatusError    Status = "error"
	StatusCanceled Status = "canceled"
)

// UsageEvent is the CloudEvents 1.0 envelope, in structured JSON mode. Field order is the
// order Encode writes.
type UsageEvent struct {
	SpecVersion string `json:"specversion"`
	Type        string `json:"type"`
	// Source is "gpuagent/<provider_id>/<offering_id>", the same pair as the NATS subject.
	Source string `json:"source"`
	// ID is unique per event across all agents and kept across re-sends; it is also the
	// Nats-Msg-Id header.
	ID string `json:"id"`
	// Time is when the request finished, in UTC, kept to the microsecond (PostgreSQL's
	// precision, so the period an event is billed in never changes on the way to the database).
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	// Subject is the request id, what the event is about within its source.
	Subject string `json:"subject"`
	Data    Usage  `json:"data"`
}

// Usage is what one request used: the event's data.
type Usage struct {
	RequestID   string `json:"request_id"`
	Ticket      string `json:"ticket"` // the route ticket the gateway issued for the request
	OfferingID  string `json:"offering_id"`
	Model       string `json:"model"`
	InputTokens int64  `json:"input_tokens"`
	// CachedInputTokens are the input tokens the engine served from its prompt cache
	// (usage.prompt_tokens_details.cached_tokens), part of InputTokens, never more. The one
	// optional field: an event without it reports none, and one with none is written without
	// it, so that agents and meters of before it and after it read each other's events.
	CachedInputTokens int64        `json:"cached_input_tokens,omitempty"`
	OutputTokens      int64        `json:"output_tokens"`
	TTFTMillis        float64      `json:"ttft_ms"`     // time to first token
	DurationMillis    float64      `json:"duration_ms"` // from the request's arrival to its last byte
	EnergyJoules      float64      `json:"energy_j"`
	EnergySource      EnergySource `json:"energy_source"`
	Status            Status       `json:"status"`
}

// NewEvent wraps u in the envelope for the offering. at is when the request finished; the
// subject is u's request id. It does not validate: call Validate before publishing.
func NewEvent(id, providerID, offeringID string, at time.Time, u Usage) UsageEvent {
	return UsageEvent{
		SpecVersion:     SpecVersion,
		Type:            EventType,
		Source:          sourcePrefix + providerID + "/" + offeringID,
		ID:              id,
		Time:            normalTime(at),
		DataContentType: DataContentType,
		Subject:         u.RequestID,
		Data:            u,
	}
}

// normalTime is t in UTC, truncated to the microsecond: PostgreSQL would otherwise round a
// time at the last nanosecond of a month into the next one.
func normalTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}
