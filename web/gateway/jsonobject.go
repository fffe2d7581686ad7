package gateway

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonObject is the top-level members of a JSON object, in the order they came, each value as
// it was written. The gateway reads a request's few members it needs, and a whole answer's
// usage, this way instead of decoding the object into a map: one check of the body (json.Valid)
// and one pass over it, without a copy of any value. A member named twice reads as its last
// value, as encoding/json reads an object into a map and as the inference servers read it, so
// the gateway and the rig never take different values of one request.
type jsonObject []jsonMember

type jsonMember struct {
	name  []byte // decoded: the body's own bytes unless the name has an escape
	value json.RawMessage
	at    int // where value starts in the object's bytes
}

// readJSONObject reads body's top-level members; ok is false when body is not a JSON object.
func readJSONObject(body []byte) (obj jsonObject, ok bool) {
	if !json.Valid(body) {
		return nil, false
	}
	return splitObject(body)
}

// splitObject reads the top-level members of body, valid JSON (a value json.Valid took, or
// one of its parts); ok is false when it is not an object.
func splitObject(body []byte) (obj jsonObject, ok bool) {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return nil, false
	}
	obj = make(jsonObject, 0, 8)
	i = skipSpace(body, i+1)
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
		i = skipSpace(body, end)
		i = skipSpace(body, i+1) // the colon
		vend := valueEnd(body, i)
		obj = append(obj, jsonMember{name: name, value: body[i:vend:vend], at: i})
		i = skipSpace(body, vend)
		if body[i] == '}' {
			return obj, true
		}
		i = skipSpace(body, i+1) // the comma
	}
}

// get returns the last value of the member name, and whether there is one.
func (o jsonObject) get(name string) (json.RawMessage, bool) {
	for k := len(o) - 1; k >= 0; k-- {
		if string(o[k].name) == name {
			return o[k].value, true
		}
	}
	return nil, false
}

// members returns the object as encoding/json decodes it into a map: each name with its last
// value. The gateway rewrites a body from it (marshalMembers).
func (o jsonObject) members() map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(o))
	for _, mb := range o {
		m[string(mb.name)] = mb.value
	}
	return m
}

// jsonString decodes a JSON string, quotes included, as encoding/json does; ok is false for
// any other value.
func jsonString(quoted []byte) (string, bool) {
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

func skipSpace(b []byte, i int) int {
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

// valueEnd is the index just past the valid JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
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

// jsonInt reads a member's whole number as encoding/json reads it into an int64: null and a
// missing member are 0; ok is false for a value that is not a whole number within int64.
func (o jsonObject) jsonInt(name string) (n int64, ok bool) {
	raw, found := o.get(name)
	if !found || string(raw) == "null" {
		return 0, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}
