// The decoders: Encode and Decode, member by member and strictly (the definition of what
// an event may be; see the package comment).

package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

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
// missing one is named. The data's one optional member, cachedInputName, is not among them.
var (
	envelopeNames = []string{"specversion", "type", "source", "id", "time", "datacontenttype", "subject", "data"}
	usageNames    = []string{"request_id", "ticket", "offering_id", "model", "input_tokens", "output_tokens",
		"ttft_ms", "duration_ms", "energy_j", "energy_source", "status"}
)

// cachedInputName is the data's one optional member: absent, no input token was cached.
const cachedInputName = "cached_input_tokens"

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
		case cachedInputName:
			err = decodeInt(m.value, &u.CachedInputTokens)
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
