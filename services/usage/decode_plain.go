// Decode's fast path, for events in the plain shape agents write.

package usage

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

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
	seenCached := false
	for more := true; more; {
		name, ok := p.memberName()
		if !ok {
			return false
		}
		if name == cachedInputName {
			// The optional member, once at most.
			if seenCached {
				return false
			}
			seenCached = true
			if u.CachedInputTokens, ok = p.integer(); !ok {
				return false
			}
			if more, ok = p.next(); !ok {
				return false
			}
			continue
		}
		i := slices.Index(usageNames, name)
		if i < 0 || seen&(1<<i) != 0 {
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
// (the input is valid UTF-8). It looks at eight bytes at a time for the closing quote, a
// backslash or a control character, and at one byte at a time only in the eight that hold one.
func (p *plainParser) plainString() (string, bool) {
	if !p.token('"') {
		return "", false
	}
	s, j := p.s, p.i
	for ; j+8 <= len(s); j += 8 {
		if special(s[j : j+8]) {
			break
		}
	}
	for ; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[p.i:j]
			p.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// special is true when one of the eight bytes of s is a quote, a backslash or a control
// character (below 0x20).
func special(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	// A byte below n makes (x - ones*n) &^ x have its high bit set, for n at most 0x80; a
	// byte equal to c makes x^(ones*c) hold a byte below 1. Bytes past the first such one
	// may be marked wrongly by the borrow, which does not change whether any is.
	below := (x - ones*0x20) &^ x
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return (below|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
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
