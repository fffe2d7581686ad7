package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Object is the top-level members of a JSON object, in the order they came, each value as
// it was written. The gateway reads a request's few members it needs, and a whole answer's
// usage, this way instead of decoding the object into a map: one check of the body (json.Valid)
// and one pass over it, without a copy of any value. A member named twice reads as its last
// value, as encoding/json reads an object into a map and as the inference servers read it, so
// the gateway and the rig never take different values of one request.
type Object []Member

type Member struct {
	Name  []byte // decoded: the body's own bytes unless the name has an escape
	Value json.RawMessage
	At    int // where value starts in the object's bytes
}

// ReadObject reads body's top-level members; ok is false when body is not a JSON object.
func ReadObject(body []byte) (obj Object, ok bool) {
	if !json.Valid(body) {
		return nil, false
	}
	return SplitObject(body)
}

// SplitObject reads the top-level members of body, valid JSON (a value json.Valid took, or
// one of its parts); ok is false when it is not an object.
func SplitObject(body []byte) (obj Object, ok bool) {
	i := SkipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return nil, false
	}
	obj = make(Object, 0, 8)
	i = SkipSpace(body, i+1)
	if body[i] == '}' {
		return obj, true
	}
	for {
		// A valid object: a name, a colon, a value, then a comma or the closing brace.
		end := stringEnd(body, i)
		name, ok := memberName(body[i:end])
		if !ok {
			return nil, false
		}
		i = SkipSpace(body, end)
		i = SkipSpace(body, i+1) // the colon
		vend := ValueEnd(body, i)
		obj = append(obj, Member{Name: name, Value: body[i:vend:vend], At: i})
		i = SkipSpace(body, vend)
		if body[i] == '}' {
			return obj, true
		}
		i = SkipSpace(body, i+1) // the comma
	}
}

// Get returns the last value of the member name, and whether there is one.
func (o Object) Get(name string) (json.RawMessage, bool) {
	for k := len(o) - 1; k >= 0; k-- {
		if string(o[k].Name) == name {
			return o[k].Value, true
		}
	}
	return nil, false
}

// Members returns the object as encoding/json decodes it into a map: each name with its last
// value. The gateway rewrites a body from it (MarshalMembers).
func (o Object) Members() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(o))
	for _, mb := range o {
		m[string(mb.Name)] = mb.Value
	}
	return m
}

// String decodes a JSON string, quotes included, as encoding/json does; ok is false for
// any other value.
func String(quoted []byte) (string, bool) {
	b, ok := memberName(quoted)
	return string(b), ok
}

// memberName decodes a JSON string, quotes included, as encoding/json does: one without an
// escape or a byte outside UTF-8 is the bytes between its quotes, not copied.
func memberName(quoted []byte) ([]byte, bool) {
	if len(quoted) < 2 || quoted[0] != '"' {
		return nil, false
	}
	inner := quoted[1 : len(quoted)-1]
	plain := utf8.Valid(inner)
	for _, c := range inner {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return inner, true
	}
	var name string
	if json.Unmarshal(quoted, &name) != nil {
		return nil, false
	}
	return []byte(name), true
}

// SkipSpace is the index of the first byte at or after b[i] that is not JSON's white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at b[i], a quote.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// ValueEnd is the index just past the valid JSON value that starts at b[i].
func ValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default: // a number, true, false or null
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return len(b)
	}
}

// Int reads a member's whole number as encoding/json reads it into an int64: null and a
// missing member are 0; ok is false for a value that is not a whole number within int64.
func (o Object) Int(name string) (n int64, ok bool) {
	raw, found := o.Get(name)
	if !found || string(raw) == "null" {
		return 0, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// MarshalMembers encodes a JSON object without escaping <, > and &, which a prompt holds as
// it is.
func MarshalMembers(members map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(members); err != nil {
		return nil, InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request.")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
