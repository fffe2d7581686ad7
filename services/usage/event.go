// Package usage owns the usage event: the contract by which an inference backend (the
// provider's gpuagent) tells the platform what one request used, and the rules that decide
// whether the meter (package metering) may bill it. CONTRACT.md beside this file is the
// contract in prose; this file is the contract in code, and the tests hold the two together.
// EnsureStreams sets up the JetStream stream the events travel on.
//
// Both sides import this package: the agent to write events, the meter to judge them. It
// depends on nothing of the platform's but route tickets (package ticket), so the agent links
// no database or ledger code.
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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpumarket/gpumarket/services/ticket"
)

// The fixed attributes of every usage event and the NATS names it travels under.
const (
	SpecVersion     = "1.0"                // CloudEvents specification version
	EventType       = "gpumarket.usage.v1" // CloudEvents type; a breaking change gets a new version
	DataContentType = "application/json"   // data is a JSON object, never data_base64
	SubjectPrefix   = "usage"              // NATS subject: usage.<provider_id>.<offering_id>
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

	// MaxClockSkew is how far an agent's clock may be off the platform's: an event may be
	// stamped up to this far in the future, and a request may appear to start up to this long
	// before its ticket was issued.
	MaxClockSkew = 5 * time.Minute

	MaxIDLength    = 128        // event id, request id, provider id, offering id (bytes, ASCII)
	MaxModelLength = 200        // model name, in characters, as the offerings table allows
	MaxTokens      = 10_000_000 // input or output tokens of one request

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
	EnergyEstimated EnergySource = "estimated" // from board power times GPU count over the request's share of the rig
)

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
	RequestID      string       `json:"request_id"`
	Ticket         string       `json:"ticket"` // the route ticket the gateway issued for the request
	OfferingID     string       `json:"offering_id"`
	Model          string       `json:"model"`
	InputTokens    int64        `json:"input_tokens"`
	OutputTokens   int64        `json:"output_tokens"`
	TTFTMillis     float64      `json:"ttft_ms"`     // time to first token
	DurationMillis float64      `json:"duration_ms"` // from the request's arrival to its last byte
	EnergyJoules   float64      `json:"energy_j"`
	EnergySource   EnergySource `json:"energy_source"`
	Status         Status       `json:"status"`
}

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

// Subject is the NATS subject an event for the offering is published to. Both ids must be
// subject tokens (ASCII letters, digits, '-' and '_'), which the platform's ids are.
func Subject(providerID, offeringID string) string {
	return SubjectPrefix + "." + providerID + "." + offeringID
}

// ParseSubject splits a subject written by Subject into its provider and offering ids.
func ParseSubject(subject string) (providerID, offeringID string, err error) {
	rest, prefixed := strings.CutPrefix(subject, SubjectPrefix+".")
	providerID, offeringID, two := strings.Cut(rest, ".")
	if !prefixed || !two || strings.Contains(offeringID, ".") {
		return "", "", fmt.Errorf("subject %.200q is not %s.<provider_id>.<offering_id>", subject, SubjectPrefix)
	}
	for _, p := range []string{providerID, offeringID} {
		if err := checkToken(p); err != nil {
			return "", "", fmt.Errorf("subject %.200q: %w", subject, err)
		}
	}
	return providerID, offeringID, nil
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

// Encode writes the event as compact JSON, refusing one that Decode would refuse as oversized.
func Encode(ev UsageEvent) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// A bus message is never embedded in HTML; escaping <, > and & would only make it longer.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, fmt.Errorf("usage: encode usage event %.200q: %w", ev.ID, err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxEventBytes {
		return nil, reject(RejectOversized, "%d bytes, more than %d", len(b), MaxEventBytes)
	}
	return b, nil
}

// Decode reads one event, strictly; see the package comment for what it refuses. Errors are
// *Rejection with reason oversized, malformed or schema. It checks the shape and the fixed
// attributes only: Validate judges the values.
//
// Events as agents write them take a fast path (decodePlain); anything else, and every
// refusal, goes through decodeStrict, which alone defines what Decode accepts.
func Decode(raw []byte) (UsageEvent, error) {
	if ev, ok := decodePlain(raw); ok {
		return ev, nil
	}
	return decodeStrict(raw)
}

// decodeStrict is Decode member by member through encoding/json: slow, and the definition.
func decodeStrict(raw []byte) (UsageEvent, error) {
	if len(raw) > MaxEventBytes {
		return UsageEvent{}, reject(RejectOversized, "%d bytes, more than %d", len(raw), MaxEventBytes)
	}
	if !utf8.Valid(raw) {
		return UsageEvent{}, reject(RejectMalformed, "not UTF-8")
	}
	members, err := objectMembers(raw)
	if errors.Is(err, errNotObject) {
		return UsageEvent{}, reject(RejectMalformed, "not a JSON object")
	}
	if err != nil {
		return UsageEvent{}, reject(RejectMalformed, "%v", err)
	}
	var ev UsageEvent
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		seen[m.name] = true
		var err error
		switch m.name {
		case "specversion":
			err = decodeString(m.value, &ev.SpecVersion)
		case "type":
			err = decodeString(m.value, &ev.Type)
		case "source":
			err = decodeString(m.value, &ev.Source)
		case "id":
			err = decodeString(m.value, &ev.ID)
		case "time":
			err = decodeTime(m.value, &ev.Time)
		case "datacontenttype":
			err = decodeString(m.value, &ev.DataContentType)
		case "subject":
			err = decodeString(m.value, &ev.Subject)
		case "data":
			if err := decodeUsage(m.value, &ev.Data); err != nil {
				return UsageEvent{}, err
			}
		default:
			err = checkExtension(m)
		}
		if err != nil {
			return UsageEvent{}, reject(RejectSchema, "%s: %v", m.name, err)
		}
	}
	for _, name := range envelopeNames {
		if !seen[name] {
			return UsageEvent{}, reject(RejectSchema, "%s is missing", name)
		}
	}
	if err := checkFixed(ev); err != nil {
		return UsageEvent{}, err
	}
	return ev, nil
}

// The members of the envelope and of its data, every one required, in the order in which a
// missing one is named.
var (
	envelopeNames = []string{"specversion", "type", "source", "id", "time", "datacontenttype", "subject", "data"}
	usageNames    = []string{"request_id", "ticket", "offering_id", "model", "input_tokens", "output_tokens",
		"ttft_ms", "duration_ms", "energy_j", "energy_source", "status"}
)

func decodeUsage(raw json.RawMessage, u *Usage) error {
	members, err := objectMembers(raw)
	if errors.Is(err, errNotObject) {
		return reject(RejectSchema, "data: not a JSON object")
	}
	if err != nil {
		return reject(RejectMalformed, "data: %v", err)
	}
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		seen[m.name] = true
		var err error
		switch m.name {
		case "request_id":
			err = decodeString(m.value, &u.RequestID)
		case "ticket":
			err = decodeString(m.value, &u.Ticket)
		case "offering_id":
			err = decodeString(m.value, &u.OfferingID)
		case "model":
			err = decodeString(m.value, &u.Model)
		case "input_tokens":
			err = decodeInt(m.value, &u.InputTokens)
		case "output_tokens":
			err = decodeInt(m.value, &u.OutputTokens)
		case "ttft_ms":
			err = decodeFloat(m.value, &u.TTFTMillis)
		case "duration_ms":
			err = decodeFloat(m.value, &u.DurationMillis)
		case "energy_j":
			err = decodeFloat(m.value, &u.EnergyJoules)
		case "energy_source":
			var s string
			err = decodeString(m.value, &s)
			u.EnergySource = EnergySource(s)
		case "status":
			var s string
			err = decodeString(m.value, &s)
			u.Status = Status(s)
		default:
			// Unknown data fields are refused: data is ours, and a field this version does not
			// know may carry a meaning it would silently drop. A new field is a new type version.
			err = errors.New("unknown field")
		}
		if err != nil {
			return reject(RejectSchema, "data.%s: %v", m.name, err)
		}
	}
	for _, name := range usageNames {
		if !seen[name] {
			return reject(RejectSchema, "data.%s is missing", name)
		}
	}
	return nil
}

type member struct {
	name  string
	value json.RawMessage
}

var errNotObject = errors.New("not a JSON object")

// objectMembers reads raw as exactly one JSON object and returns its members in order. It
// refuses duplicate names, which encoding/json would resolve silently (last wins) and
// another reader might resolve the other way, and anything after the object.
func objectMembers(raw []byte) ([]member, error) {
	members, err := readMembers(json.NewDecoder(bytes.NewReader(raw)))
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errors.New("the JSON ends early")
	}
	return members, err
}

func readMembers(dec *json.Decoder) ([]member, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errNotObject
	}
	var members []member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("member name %v is not a string", tok)
		}
		if seen[name] {
			return nil, fmt.Errorf("member %.100q appears twice", name)
		}
		seen[name] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		members = append(members, member{name, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return members, nil
}

func decodeString(raw json.RawMessage, s *string) error {
	if raw[0] != '"' {
		return errors.New("not a string")
	}
	return json.Unmarshal(raw, s)
}

func decodeTime(raw json.RawMessage, t *time.Time) error {
	if raw[0] != '"' {
		return errors.New("not a string")
	}
	if err := json.Unmarshal(raw, t); err != nil {
		return errors.New("not an RFC 3339 time")
	}
	*t = normalTime(*t)
	return nil
}

func decodeInt(raw json.RawMessage, n *int64) error {
	// encoding/json refuses fractions, exponents and overflow when the target is an int64.
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') || json.Unmarshal(raw, n) != nil {
		return errors.New("not an integer")
	}
	return nil
}

func decodeFloat(raw json.RawMessage, f *float64) error {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') || json.Unmarshal(raw, f) != nil {
		return errors.New("not a number")
	}
	return nil
}

// checkExtension allows a CloudEvents extension attribute: a name of lower-case ASCII letters
// and digits with a scalar value. Its value is not kept.
func checkExtension(m member) error {
	if m.name == "data_base64" {
		return errors.New("binary data is not accepted; data must be a JSON object")
	}
	if m.name == "" {
		return errors.New("an attribute name is empty")
	}
	for _, c := range m.name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return errors.New("not a CloudEvents attribute name (lower-case letters and digits)")
		}
	}
	switch m.value[0] {
	case '{', '[', 'n':
		return errors.New("an extension attribute must be a string, number or boolean")
	}
	return nil
}

// checkFixed refuses an envelope whose fixed attributes are not this contract's.
func checkFixed(ev UsageEvent) error {
	switch {
	case ev.SpecVersion != SpecVersion:
		return reject(RejectSchema, "specversion %.50q is not %q", ev.SpecVersion, SpecVersion)
	case ev.Type != EventType:
		return reject(RejectSchema, "type %.100q is not %q", ev.Type, EventType)
	case ev.DataContentType != DataContentType:
		return reject(RejectSchema, "datacontenttype %.100q is not %q", ev.DataContentType, DataContentType)
	}
	return nil
}

// decodePlain is Decode's fast path, for events in the plain shape agents write: no escape
// and no control character in any name or string, extension attributes that are strings,
// integers of at most 18 digits, a time in UTC ("Z") with at most nine fractional digits,
// every member once. On that shape it returns what decodeStrict returns, with one allocation
// (a copy of raw, of which every string it returns is a part); for anything else, valid or
// not, it answers ok=false and leaves the event to decodeStrict. FuzzDecodePlain holds the
// two together.
func decodePlain(raw []byte) (UsageEvent, bool) {
	if len(raw) > MaxEventBytes || !utf8.Valid(raw) {
		return UsageEvent{}, false
	}
	p := plainParser{s: string(raw)}
	var ev UsageEvent
	var seen uint
	var extensions []string
	if !p.token('{') {
		return UsageEvent{}, false
	}
	for more := true; more; {
		name, ok := p.memberName()
		if !ok {
			return UsageEvent{}, false
		}
		if i := slices.Index(envelopeNames, name); i >= 0 {
			ok = seen&(1<<i) == 0 && p.envelopeMember(name, &ev)
			seen |= 1 << i
		} else {
			// An extension attribute, or a name decodeStrict refuses.
			if !isExtensionName(name) || slices.Contains(extensions, name) {
				return UsageEvent{}, false
			}
			extensions = append(extensions, name)
			_, ok = p.plainString()
		}
		if !ok {
			return UsageEvent{}, false
		}
		if more, ok = p.next(); !ok {
			return UsageEvent{}, false
		}
	}
	if seen != 1<<len(envelopeNames)-1 || !p.end() || checkFixed(ev) != nil {
		return UsageEvent{}, false
	}
	return ev, true
}

// envelopeMember reads the value of the envelope's member name into ev.
func (p *plainParser) envelopeMember(name string, ev *UsageEvent) (ok bool) {
	switch name {
	case "specversion":
		ev.SpecVersion, ok = p.plainString()
	case "type":
		ev.Type, ok = p.plainString()
	case "source":
		ev.Source, ok = p.plainString()
	case "id":
		ev.ID, ok = p.plainString()
	case "time":
		ev.Time, ok = p.timestamp()
	case "datacontenttype":
		ev.DataContentType, ok = p.plainString()
	case "subject":
		ev.Subject, ok = p.plainString()
	case "data":
		ok = p.usage(&ev.Data)
	}
	return ok
}

// isExtensionName is true for a name checkExtension accepts: lower-case ASCII letters and
// digits.
func isExtensionName(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return name != ""
}

// plainParser reads the plain shape of JSON decodePlain accepts, from s at i.
type plainParser struct {
	s string
	i int
}

func (p *plainParser) usage(u *Usage) bool {
	if !p.token('{') {
		return false
	}
	var seen uint
	for more := true; more; {
		name, ok := p.memberName()
		i := slices.Index(usageNames, name)
		if !ok || i < 0 || seen&(1<<i) != 0 {
			return false
		}
		seen |= 1 << i
		var s string
		switch name {
		case "request_id":
			u.RequestID, ok = p.plainString()
		case "ticket":
			u.Ticket, ok = p.plainString()
		case "offering_id":
			u.OfferingID, ok = p.plainString()
		case "model":
			u.Model, ok = p.plainString()
		case "input_tokens":
			u.InputTokens, ok = p.integer()
		case "output_tokens":
			u.OutputTokens, ok = p.integer()
		case "ttft_ms":
			u.TTFTMillis, ok = p.float()
		case "duration_ms":
			u.DurationMillis, ok = p.float()
		case "energy_j":
			u.EnergyJoules, ok = p.float()
		case "energy_source":
			s, ok = p.plainString()
			u.EnergySource = EnergySource(s)
		case "status":
			s, ok = p.plainString()
			u.Status = Status(s)
		}
		if !ok {
			return false
		}
		if more, ok = p.next(); !ok {
			return false
		}
	}
	return seen == 1<<len(usageNames)-1
}

// space skips whitespace.
func (p *plainParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// token reads c, after any whitespace.
func (p *plainParser) token(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// memberName reads a member's name and the colon after it.
func (p *plainParser) memberName() (string, bool) {
	name, ok := p.plainString()
	return name, ok && p.token(':')
}

// next reads the comma before another member (more) or the brace that closes the object.
func (p *plainParser) next() (more, ok bool) {
	if p.token(',') {
		return true, true
	}
	return false, p.token('}')
}

// end is true when nothing but whitespace is left.
func (p *plainParser) end() bool {
	p.space()
	return p.i == len(p.s)
}

// plainString reads a string without escapes or control characters: its value is its bytes
// (the input is valid UTF-8).
func (p *plainParser) plainString() (string, bool) {
	if !p.token('"') {
		return "", false
	}
	for j := p.i; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			s := p.s[p.i:j]
			p.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// number reads a number in JSON's grammar and returns its text.
func (p *plainParser) number() (string, bool) {
	p.space()
	s, start := p.s, p.i
	digits := func(j int) int {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j
	}
	j := start
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && s[j] >= '1' && s[j] <= '9':
		j = digits(j)
	default:
		return "", false
	}
	if j < len(s) && s[j] == '.' {
		if k := digits(j + 1); k > j+1 {
			j = k
		} else {
			return "", false
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if k := digits(j); k > j {
			j = k
		} else {
			return "", false
		}
	}
	p.i = j
	return s[start:j], true
}

// integer reads an integer of at most 18 digits, which no int64 overflows.
func (p *plainParser) integer() (int64, bool) {
	lit, ok := p.number()
	digits, negative := strings.CutPrefix(lit, "-")
	if !ok || len(digits) > 18 {
		return 0, false
	}
	n, ok := decimal(digits) // false for a fraction or an exponent
	if negative {
		n = -n
	}
	return int64(n), ok
}

// float reads a number as encoding/json reads it into a float64.
func (p *plainParser) float() (float64, bool) {
	lit, ok := p.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(lit, 64)
	return f, err == nil
}

// timestamp reads an RFC 3339 time in UTC ("Z") with at most nine fractional digits, as
// Time.UnmarshalJSON reads it, and normalises it as decodeTime does.
func (p *plainParser) timestamp() (time.Time, bool) {
	s, ok := p.plainString()
	const layout = "2006-01-02T15:04:05Z"
	if !ok || len(s) < len(layout) || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, okY := decimal(s[0:4])
	month, okM := decimal(s[5:7])
	day, okD := decimal(s[8:10])
	hour, okH := decimal(s[11:13])
	minute, okMin := decimal(s[14:16])
	sec, okS := decimal(s[17:19])
	if !okY || !okM || !okD || !okH || !okMin || !okS || month < 1 || month > 12 || day < 1 ||
		day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := s[19 : len(s)-1]; frac != "" {
		digits, dot := strings.CutPrefix(frac, ".")
		n, ok := decimal(digits)
		if !dot || !ok || len(digits) > 9 {
			return time.Time{}, false
		}
		for range 9 - len(digits) {
			n *= 10
		}
		nsec = n
	}
	return normalTime(time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)), true
}

// decimal reads one or more ASCII digits.
func decimal(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, s != ""
}

// daysIn is the number of days in the month of the (proleptic Gregorian) year.
func daysIn(month, year int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1]
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

	provider, offering, err := ParseSubject(subject)
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
	if err := checkToken(u.OfferingID); err != nil {
		return reject(RejectSchema, "data.offering_id: %v", err)
	}
	if err := checkModel(u.Model); err != nil {
		return reject(RejectSchema, "data.model: %v", err)
	}
	if u.InputTokens < 0 || u.InputTokens > MaxTokens {
		return reject(RejectSchema, "data.input_tokens %d is not between 0 and %d", u.InputTokens, MaxTokens)
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
	if u.EnergySource != EnergyMeasured && u.EnergySource != EnergyEstimated {
		return reject(RejectSchema, "data.energy_source %.50q is not %q or %q", u.EnergySource, EnergyMeasured, EnergyEstimated)
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

// checkToken accepts a provider or offering id: 1 to MaxIDLength ASCII letters, digits, '-'
// and '_', so that it is one NATS subject token and one path segment of source.
func checkToken(s string) error {
	if s == "" || len(s) > MaxIDLength {
		return fmt.Errorf("an id must be 1 to %d characters", MaxIDLength)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return fmt.Errorf("id %.200q may hold only ASCII letters, digits, - and _", s)
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
		if err := checkToken(id); err != nil {
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
