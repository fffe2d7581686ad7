package usage

import (
	"bytes"
	"slices"
	"testing"
)

// plainVariants are events near the plain shape, on both sides of its edges: each is decoded
// by both paths in FuzzDecodePlain's seeds.
func plainVariants(t testing.TB) [][]byte {
	t.Helper()
	compact, err := Encode(exampleEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	swap := func(old, new string) []byte {
		if !bytes.Contains(compact, []byte(old)) {
			t.Fatalf("the compact example holds no %s", old)
		}
		return bytes.Replace(compact, []byte(old), []byte(new), 1)
	}
	out := [][]byte{compact, readExample(t), []byte(" \t\r\n" + string(compact) + "\n ")}
	for _, c := range []struct{ old, new string }{
		// numbers
		{`"input_tokens":512`, `"input_tokens":-0`},
		{`"input_tokens":512`, `"input_tokens":0512`},
		{`"input_tokens":512`, `"input_tokens":512.0`},
		{`"input_tokens":512`, `"input_tokens":5e2`},
		{`"input_tokens":512`, `"input_tokens":999999999999999999`},
		{`"input_tokens":512`, `"input_tokens":9223372036854775807`},
		{`"input_tokens":512`, `"input_tokens":9223372036854775808`},
		{`"input_tokens":512`, `"input_tokens":-`},
		{`"input_tokens":512`, `"input_tokens":"512"`},
		{`"input_tokens":512`, `"input_tokens":null`},
		{`"ttft_ms":212.4`, `"ttft_ms":2.124e2`},
		{`"ttft_ms":212.4`, `"ttft_ms":2.124E+2`},
		{`"ttft_ms":212.4`, `"ttft_ms":1e400`},
		{`"ttft_ms":212.4`, `"ttft_ms":212.`},
		{`"ttft_ms":212.4`, `"ttft_ms":.5`},
		{`"ttft_ms":212.4`, `"ttft_ms":1e`},
		{`"ttft_ms":212.4`, `"ttft_ms":0x10`},
		{`"ttft_ms":212.4`, `"ttft_ms":Infinity`},
		{`"ttft_ms":212.4`, "\"ttft_ms\":\x00212.4"},
		// times
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01.123456789Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01.1234567891Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01.Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01,25Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01.25+00:00"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30t12:00:01.25z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2028-02-29T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-02-29T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2100-02-29T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2000-02-29T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-31T12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T24:00:00Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T23:59:60Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"0000-01-01T00:00:00Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01.999999999Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30 12:00:01Z"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":"2026-11-30T12:00:01\u005a"`},
		{`"time":"2026-11-30T12:00:01.25Z"`, `"time":1796040001`},
		// strings and names
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, `"model":"meta-llama\/Llama-3.1-8B-Instruct"`},
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, `"model":"Llama 3 — ünïcode ✓"`},
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, "\"model\":\"tab\there\""},
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, "\"model\":\"\x7f\""},
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, `"model":""`},
		{`"model":"meta-llama/Llama-3.1-8B-Instruct"`, `"model":"unterminated`},
		{`"specversion":"1.0"`, `"specversi\u006fn":"1.0"`},
		{`"specversion":"1.0"`, `"specversion":"1.0","specversion":"1.0"`},
		{`"specversion":"1.0"`, `"specversion":"2.0"`},
		{`"specversion":"1.0"`, `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","specversion":"1.0"`},
		{`"specversion":"1.0"`, `"ext1":"a","ext1":"b","specversion":"1.0"`},
		{`"specversion":"1.0"`, `"ext1":1,"specversion":"1.0"`},
		{`"specversion":"1.0"`, `"ext1":true,"specversion":"1.0"`},
		{`"specversion":"1.0"`, `"ext1":null,"specversion":"1.0"`},
		{`"specversion":"1.0"`, `"ext1":{},"specversion":"1.0"`},
		{`"specversion":"1.0"`, `"Ext":"a","specversion":"1.0"`},
		{`"specversion":"1.0"`, `"data_base64":"AA==","specversion":"1.0"`},
		{`"specversion":"1.0",`, ``},
		{`"status":"ok"`, `"status":"ok","status":"ok"`},
		{`"status":"ok"`, `"status":"ok","extra":1`},
		{`,"status":"ok"`, ``},
		// structure
		{`"data":{`, `"data":{}, "x":{`},
		{`"data":{`, `"data":[{`},
		{`}}`, `},}`},
		{`}}`, `}}}`},
		{`}}`, `}} {}`},
		{`}}`, "}}\x00"},
	} {
		out = append(out, swap(c.old, c.new))
	}
	return out
}

// FuzzDecodePlain holds Decode's fast path to its definition: whatever decodePlain accepts,
// decodeStrict accepts too, as the same event.
func FuzzDecodePlain(f *testing.F) {
	for _, v := range plainVariants(f) {
		f.Add(v)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		plain, ok := decodePlain(raw)
		if !ok {
			return
		}
		strict, err := decodeStrict(raw)
		if err != nil {
			t.Fatalf("decodePlain accepts what decodeStrict refuses (%v):\n%s", err, raw)
		}
		if plain != strict {
			t.Fatalf("decodePlain and decodeStrict disagree on\n%s\n plain  %+v\n strict %+v", raw, plain, strict)
		}
	})
}

// TestDecodePlainAgreesOnEveryMutation holds the two paths together on every event one byte
// away from an agent's: each byte deleted, or replaced by or preceded by one of the bytes that
// matter to JSON, RFC 3339 times and numbers. The ticket's inside, opaque base64, is spared.
func TestDecodePlainAgreesOnEveryMutation(t *testing.T) {
	ev := exampleEvent(t)
	compact, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	ticketAt := bytes.Index(compact, []byte(ev.Data.Ticket))
	accepted := 0
	for i := range compact {
		if i > ticketAt+2 && i < ticketAt+len(ev.Data.Ticket)-2 {
			continue
		}
		for _, b := range []byte("\x00\xff \"\\,:{}[0159.eE-TZz") {
			for _, raw := range [][]byte{
				slices.Concat(compact[:i], compact[i+1:]),
				slices.Concat(compact[:i], []byte{b}, compact[i+1:]),
				slices.Concat(compact[:i], []byte{b}, compact[i:]),
			} {
				plain, ok := decodePlain(raw)
				if !ok {
					continue
				}
				accepted++
				strict, err := decodeStrict(raw)
				if err != nil || plain != strict {
					t.Fatalf("decodePlain and decodeStrict disagree on\n%s\n plain  %+v\n strict %+v, %v", raw, plain, strict, err)
				}
			}
		}
	}
	if accepted == 0 {
		t.Fatal("the fast path accepted no mutation at all")
	}
}

// TestDecodePlainTakesAgentsEvents checks that the fast path is the one taken for events as
// Encode writes them, with or without whitespace and extension attributes.
func TestDecodePlainTakesAgentsEvents(t *testing.T) {
	compact, err := Encode(exampleEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	withExtension := bytes.Replace(compact, []byte(`{`), []byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",`), 1)
	for name, raw := range map[string][]byte{"compact": compact, "indented": readExample(t), "extension": withExtension} {
		if _, ok := decodePlain(raw); !ok {
			t.Errorf("%s: the fast path refused an agent's event:\n%s", name, raw)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	raw, err := Encode(exampleEvent(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeStrict(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
