// The rules: why an event is refused (Rejection), Validate for its values and its subject,
// and VerifyTicket for its route ticket.

package usage

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// RejectReason says why the meter refused an event. The values are stored with each
// rejection and used as metric labels: never rename one.
type RejectReason string

const (
	RejectMalformed       RejectReason = "malformed"        // not one UTF-8 JSON object, or duplicate member names
	RejectOversized       RejectReason = "oversized"        // longer than MaxEventBytes
	RejectSchema          RejectReason = "schema"           // valid JSON that breaks the contract: missing, unknown, mistyped or out-of-bounds fields
	RejectSubjectMismatch RejectReason = "subject_mismatch" // the NATS subject, source and data.offering_id disagree
	RejectTicketInvalid   RejectReason = "ticket_invalid"   // no ticket, a forged or expired one, or one for another request
	RejectTicketOffering  RejectReason = "ticket_offering"  // a genuine ticket for another offering
	RejectStale           RejectReason = "stale"            // older than MaxEventAge
	RejectFuture          RejectReason = "future"           // more than MaxClockSkew in the future
	RejectDuplicate       RejectReason = "duplicate"        // the meter already holds this event id or request id
)

// Rejection is why an event is refused: a reason from the list above and a detail for the
// person who reviews it.
type Rejection struct {
	Reason RejectReason
	Detail string
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("usage event rejected (%s): %s", r.Reason, r.Detail)
}

func reject(reason RejectReason, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the reason of the first *Rejection in err's chain, or "" when there is none.
func ReasonOf(err error) RejectReason {
	var r *Rejection
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// Validate checks an event received on the NATS subject at now: everything but the ticket's
// signature, which VerifyTicket checks. The first failed check names the reason: schema
// (fixed attributes, ids, bounds, enums; ticket_invalid for a missing ticket), then
// subject_mismatch, then future and stale.
func Validate(ev UsageEvent, subject string, now time.Time) error {
	if err := checkFixed(ev); err != nil {
		return err
	}
	if err := checkID(ev.ID); err != nil {
		return reject(RejectSchema, "id: %v", err)
	}
	srcProvider, srcOffering, err := parseSource(ev.Source)
	if err != nil {
		return reject(RejectSchema, "source: %v", err)
	}
	if ev.Time.IsZero() {
		return reject(RejectSchema, "time is missing")
	}
	if ev.Subject != ev.Data.RequestID {
		return reject(RejectSchema, "subject %.200q is not data.request_id %.200q", ev.Subject, ev.Data.RequestID)
	}
	if err := validateUsage(ev.Data); err != nil {
		return err
	}

	provider, offering, err := events.ParseUsageSubject(subject)
	if err != nil {
		return reject(RejectSubjectMismatch, "%v", err)
	}
	if srcProvider != provider || srcOffering != offering {
		return reject(RejectSubjectMismatch, "source %q was published to %q", ev.Source, subject)
	}
	if ev.Data.OfferingID != offering {
		return reject(RejectSubjectMismatch, "data.offering_id %q was published to %q", ev.Data.OfferingID, subject)
	}

	if ev.Time.After(now.Add(MaxClockSkew)) {
		return reject(RejectFuture, "time %s is %s ahead of the meter's clock", ev.Time.Format(time.RFC3339Nano), ev.Time.Sub(now).Round(time.Second))
	}
	if now.Sub(ev.Time) > MaxEventAge {
		return reject(RejectStale, "time %s is older than %s", ev.Time.Format(time.RFC3339Nano), MaxEventAge)
	}
	return nil
}

func validateUsage(u Usage) error {
	if err := checkID(u.RequestID); err != nil {
		return reject(RejectSchema, "data.request_id: %v", err)
	}
	if err := events.CheckID(u.OfferingID); err != nil {
		return reject(RejectSchema, "data.offering_id: %v", err)
	}
	if err := checkModel(u.Model); err != nil {
		return reject(RejectSchema, "data.model: %v", err)
	}
	if u.InputTokens < 0 || u.InputTokens > MaxTokens {
		return reject(RejectSchema, "data.input_tokens %d is not between 0 and %d", u.InputTokens, MaxTokens)
	}
	// An engine's cached tokens are a part of its prompt tokens: more of them than the input is
	// no count an engine makes, and the event is refused rather than guessed at.
	if u.CachedInputTokens < 0 || u.CachedInputTokens > u.InputTokens {
		return reject(RejectSchema, "data.cached_input_tokens %d is not between 0 and input_tokens %d", u.CachedInputTokens, u.InputTokens)
	}
	if u.OutputTokens < 0 || u.OutputTokens > MaxTokens {
		return reject(RejectSchema, "data.output_tokens %d is not between 0 and %d", u.OutputTokens, MaxTokens)
	}
	// Written as !(in range) so that NaN, which Go callers can produce, fails too.
	if !(u.DurationMillis >= 0 && u.DurationMillis <= MaxDurationMillis) {
		return reject(RejectSchema, "data.duration_ms %g is not between 0 and %d", u.DurationMillis, MaxDurationMillis)
	}
	if !(u.TTFTMillis >= 0 && u.TTFTMillis <= u.DurationMillis) {
		return reject(RejectSchema, "data.ttft_ms %g is not between 0 and duration_ms %g", u.TTFTMillis, u.DurationMillis)
	}
	if !(u.EnergyJoules >= 0 && u.EnergyJoules <= MaxEnergyJoules) {
		return reject(RejectSchema, "data.energy_j %g is not between 0 and %g", u.EnergyJoules, float64(MaxEnergyJoules))
	}
	if !u.EnergySource.Valid() {
		return reject(RejectSchema, "data.energy_source %.50q is not %q, %q or %q", u.EnergySource, EnergyMeasured, EnergySimulated, EnergyEstimated)
	}
	if u.Status != StatusOK && u.Status != StatusError && u.Status != StatusCanceled {
		return reject(RejectSchema, "data.status %.50q is not %q, %q or %q", u.Status, StatusOK, StatusError, StatusCanceled)
	}
	// The ticket's signature is VerifyTicket's to judge; its presence and size are judged here
	// so that every event Validate passes is small, and a missing one is named for what it is.
	if u.Ticket == "" {
		return reject(RejectTicketInvalid, "data.ticket is empty")
	}
	if len(u.Ticket) > ticket.MaxLength {
		return reject(RejectTicketInvalid, "data.ticket is longer than %d bytes", ticket.MaxLength)
	}
	for i := 0; i < len(u.Ticket); i++ {
		if c := u.Ticket[i]; c <= ' ' || c > '~' {
			return reject(RejectTicketInvalid, "data.ticket holds a character that is not printable ASCII")
		}
	}
	return nil
}

// checkID accepts an event or request id: 1 to MaxIDLength ASCII letters, digits and ". _ : -",
// which fits a NATS header, a URL, a log line and a database key unescaped (UUIDs, ULIDs,
// "req_..." all do).
func checkID(s string) error {
	if s == "" || len(s) > MaxIDLength {
		return fmt.Errorf("must be 1 to %d characters", MaxIDLength)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return errors.New("may hold only ASCII letters, digits and . _ : -")
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// checkModel accepts 1 to MaxModelLength printable characters: a model name is shown on
// usage pages and in CSV exports, where control and bidirectional-override characters do harm.
func checkModel(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not UTF-8")
	}
	if n := utf8.RuneCountInString(s); n == 0 || n > MaxModelLength {
		return fmt.Errorf("must be 1 to %d characters", MaxModelLength)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("holds the unprintable character %U", r)
		}
	}
	return nil
}

func parseSource(s string) (providerID, offeringID string, err error) {
	rest, ok := strings.CutPrefix(s, sourcePrefix)
	providerID, offeringID, two := strings.Cut(rest, "/")
	if !ok || !two {
		return "", "", fmt.Errorf("%.300q is not %s<provider_id>/<offering_id>", s, sourcePrefix)
	}
	for _, id := range []string{providerID, offeringID} {
		if err := events.CheckID(id); err != nil {
			return "", "", err
		}
	}
	return providerID, offeringID, nil
}

// VerifyTicket checks the event's route ticket: signed with the platform's key, for
// data.offering_id, for data.request_id, issued within maxAge before now, and issued before
// the request started (give or take MaxClockSkew). It returns the ticket's claims, which say
// whom to bill and at which tier; on any failure it returns no claims and a *Rejection:
// ticket_offering for a genuine ticket of another offering, ticket_invalid otherwise.
//
// Call it after Validate. now is the meter's clock, not the event's (an agent's clock is not
// trusted to the ticket's few seconds of skew). maxAge must cover the longest request and the
// longest an event may wait in an agent's outbox, MaxEventAge plus a day; a ticket still bills
// only one request, since request ids are unique forever.
func VerifyTicket(ev UsageEvent, signer *ticket.Signer, now time.Time, maxAge time.Duration) (ticket.Claims, error) {
	c, err := signer.Verify(ev.Data.Ticket, ev.Data.OfferingID, now, maxAge)
	if errors.Is(err, ticket.ErrOffering) {
		return ticket.Claims{}, reject(RejectTicketOffering, "the ticket is for offering %q, the event for %q", c.OfferingID, ev.Data.OfferingID)
	}
	if err != nil {
		return ticket.Claims{}, reject(RejectTicketInvalid, "%v", err)
	}
	if c.RequestID != ev.Data.RequestID {
		return ticket.Claims{}, reject(RejectTicketInvalid, "the ticket is for request %q, the event for %q", c.RequestID, ev.Data.RequestID)
	}
	// A request cannot start before the gateway routed it: this stops an event being
	// back-dated into an earlier billing period or price.
	started := ev.Time.Add(-time.Duration(ev.Data.DurationMillis * float64(time.Millisecond)))
	if started.Before(c.IssuedAt.Add(-MaxClockSkew)) {
		return ticket.Claims{}, reject(RejectTicketInvalid, "the request started at %s, before its ticket was issued at %s",
			started.Format(time.RFC3339Nano), c.IssuedAt.Format(time.RFC3339Nano))
	}
	return c, nil
}
