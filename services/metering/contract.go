// Package metering is the meter: it pulls usage events from the stream, judges them, prices
// them and bills each request exactly once, and it reads usage back for the usage pages,
// the reports and the live feed routing keeps its figures with.
//
// The usage event itself, the contract between the provider's gpuagent and the meter, lives
// in package usage (services/usage, with CONTRACT.md). This file gives its names here too,
// as aliases and forwarding functions, so that the platform's code speaks of metering.UsageEvent,
// metering.Decode and the like; the agent imports package usage alone.
package metering

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/services/usage"
)

// The usage event and its parts (package usage).
type (
	UsageEvent    = usage.UsageEvent
	Usage         = usage.Usage
	EnergySource  = usage.EnergySource
	Status        = usage.Status
	RejectReason  = usage.RejectReason
	Rejection     = usage.Rejection
	StreamOptions = usage.StreamOptions
)

// The fixed attributes of every usage event and the NATS names it travels under.
const (
	SpecVersion     = usage.SpecVersion
	EventType       = usage.EventType
	DataContentType = usage.DataContentType
	SubjectPrefix   = usage.SubjectPrefix
	HeaderMsgID     = usage.HeaderMsgID
)

// Bounds of an acceptable event.
const (
	MaxEventBytes     = usage.MaxEventBytes
	MaxEventAge       = usage.MaxEventAge
	MaxClockSkew      = usage.MaxClockSkew
	MaxIDLength       = usage.MaxIDLength
	MaxModelLength    = usage.MaxModelLength
	MaxTokens         = usage.MaxTokens
	MaxDurationMillis = usage.MaxDurationMillis
	MaxEnergyJoules   = usage.MaxEnergyJoules
)

// How the energy figure was obtained, and how a request ended.
const (
	EnergyMeasured  = usage.EnergyMeasured
	EnergyEstimated = usage.EnergyEstimated

	StatusOK       = usage.StatusOK
	StatusError    = usage.StatusError
	StatusCanceled = usage.StatusCanceled
)

// Why an event is refused by the contract's checks; the meter's own reasons are in meter.go.
const (
	RejectMalformed       = usage.RejectMalformed
	RejectOversized       = usage.RejectOversized
	RejectSchema          = usage.RejectSchema
	RejectSubjectMismatch = usage.RejectSubjectMismatch
	RejectTicketInvalid   = usage.RejectTicketInvalid
	RejectTicketOffering  = usage.RejectTicketOffering
	RejectStale           = usage.RejectStale
	RejectFuture          = usage.RejectFuture
	RejectDuplicate       = usage.RejectDuplicate
)

// Stream names and the meter's durable consumer.
const (
	StreamName         = usage.StreamName
	RejectedStreamName = usage.RejectedStreamName
	RejectedSubject    = usage.RejectedSubject
	ConsumerName       = usage.ConsumerName
	// DefaultMaxPendingPerRig is usage.DefaultMaxPendingPerRig.
	DefaultMaxPendingPerRig = usage.DefaultMaxPendingPerRig
)

// NewEvent is usage.NewEvent.
func NewEvent(id, providerID, offeringID string, at time.Time, u Usage) UsageEvent {
	return usage.NewEvent(id, providerID, offeringID, at, u)
}

// Encode is usage.Encode.
func Encode(ev UsageEvent) ([]byte, error) { return usage.Encode(ev) }

// Decode is usage.Decode.
func Decode(raw []byte) (UsageEvent, error) { return usage.Decode(raw) }

// Validate is usage.Validate.
func Validate(ev UsageEvent, subject string, now time.Time) error {
	return usage.Validate(ev, subject, now)
}

// VerifyTicket is usage.VerifyTicket.
func VerifyTicket(ev UsageEvent, signer *ticket.Signer, now time.Time, maxAge time.Duration) (ticket.Claims, error) {
	return usage.VerifyTicket(ev, signer, now, maxAge)
}

// ReasonOf is usage.ReasonOf.
func ReasonOf(err error) RejectReason { return usage.ReasonOf(err) }

// Subject is usage.Subject.
func Subject(providerID, offeringID string) string { return usage.Subject(providerID, offeringID) }

// ParseSubject is usage.ParseSubject.
func ParseSubject(subject string) (providerID, offeringID string, err error) {
	return usage.ParseSubject(subject)
}

// EnsureStreams is usage.EnsureStreams.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts StreamOptions) (jetstream.Consumer, error) {
	return usage.EnsureStreams(ctx, js, opts)
}

// reject is a refusal for one of the meter's own checks.
func reject(reason RejectReason, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
