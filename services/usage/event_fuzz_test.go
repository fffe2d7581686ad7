package usage

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
)

// FuzzDecodeValidate feeds arbitrary bytes to the meter's front door. Decode and Validate
// never panic; every refusal is a rejection with a reason Decode may give; and whatever
// validates encodes and decodes back to the same event, valid still.
func FuzzDecodeValidate(f *testing.F) {
	example := readExample(f)
	f.Add(example)
	if compact, err := Encode(exampleEvent(f)); err == nil {
		f.Add(compact)
	}
	f.Add(bytes.Replace(example, []byte(`"status": "ok"`), []byte(`"status": "ok", "status": "error"`), 1))
	f.Add(bytes.Replace(example, []byte(`"input_tokens": 512`), []byte(`"input_tokens": 5.12e2`), 1))
	f.Add(bytes.Replace(example, []byte(`"model": "meta-llama/Llama-3.1-8B-Instruct"`), []byte(`"model": "\u202e\ud800<&>"`), 1))
	f.Add(bytes.Replace(example, []byte(`"specversion"`), []byte(`"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "specversion"`), 1))
	f.Add([]byte(`{"specversion":"1.0","data":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{}{}`))

	fixedNow := time.Date(2026, 11, 30, 12, 0, 2, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := Decode(raw)
		if err != nil {
			switch ReasonOf(err) {
			case RejectMalformed, RejectOversized, RejectSchema:
			default:
				t.Fatalf("Decode refused with %v, not a malformed, oversized or schema rejection", err)
			}
			return
		}
		// Judged on the example's subject and clock, and on its own source and time, so that
		// both the refusals and the valid path are explored.
		_ = Validate(ev, exampleSubject, fixedNow)
		subject := exampleSubject
		if p, o, err := parseSource(ev.Source); err == nil {
			subject = events.UsageSubject(p, o)
		}
		if err := Validate(ev, subject, ev.Time); err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("Validate refused with %v, not a rejection", err)
			}
			return
		}
		again, err := Encode(ev)
		if err != nil {
			t.Fatalf("a valid event does not encode: %v", err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("a valid event does not decode after encoding: %v\n%s", err, again)
		}
		if back != ev {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", back, ev)
		}
		if err := Validate(back, subject, ev.Time); err != nil {
			t.Fatalf("a valid event is invalid after a round trip: %v", err)
		}
	})
}
