package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// The example's ticket is signed with this key; it is a test key and signs nothing real.
const exampleTicketKey = "gpumarket-example-ticket-key-not-secret"

const (
	exampleProvider = "7c1f0e52-3a4b-4c8d-9e2f-0a1b2c3d4e5f"
	exampleOffering = "3f9a2b1c-5d6e-4f70-8a9b-c0d1e2f3a4b5"
	exampleRequest  = "req_01JDXB8W5Q3K7M9P2R4T6V8X0Z"
)

// exampleSubject is the example event's subject.
var exampleSubject = events.UsageSubject(exampleProvider, exampleOffering)

// exampleNow is a second after the example event was stamped.
var exampleNow = time.Date(2026, 11, 30, 12, 0, 2, 0, time.UTC)

func readExample(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/usage-event.example.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func exampleEvent(t testing.TB) UsageEvent {
	t.Helper()
	ev, err := Decode(readExample(t))
	if err != nil {
		t.Fatalf("the example does not decode: %v", err)
	}
	return ev
}

func TestExampleIsValid(t *testing.T) {
	ev := exampleEvent(t)
	want := UsageEvent{
		SpecVersion:     "1.0",
		Type:            "gpumarket.usage.v1",
		Source:          "gpuagent/" + exampleProvider + "/" + exampleOffering,
		ID:              "0193d2a4-6f1e-7b3c-9a2d-4e5f6a7b8c9d",
		Time:            time.Date(2026, 11, 30, 12, 0, 1, 250_000_000, time.UTC),
		DataContentType: "application/json",
		Subject:         exampleRequest,
		Data: Usage{
			RequestID:         exampleRequest,
			Ticket:            ev.Data.Ticket,
			OfferingID:        exampleOffering,
			Model:             "meta-llama/Llama-3.1-8B-Instruct",
			InputTokens:       512,
			CachedInputTokens: 384,
			OutputTokens:      128,
			TTFTMillis:        212.4,
			DurationMillis:    4310.7,
			EnergyJoules:      2861.5,
			EnergySource:      EnergyEstimated,
			Status:            StatusOK,
		},
	}
	if ev != want {
		t.Fatalf("decoded example:\n got %+v\nwant %+v", ev, want)
	}
	if err := Validate(ev, exampleSubject, exampleNow); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	if got := events.UsageSubject(exampleProvider, exampleOffering); got != exampleSubject {
		t.Fatalf("Subject = %q, want %q", got, exampleSubject)
	}

	signer, err := ticket.NewSigner([]byte(exampleTicketKey))
	if err != nil {
		t.Fatal(err)
	}
	c, err := VerifyTicket(ev, signer, exampleNow, MaxEventAge)
	if err != nil {
		t.Fatalf("the example's ticket does not verify: %v", err)
	}
	if c.RequestID != exampleRequest || c.OfferingID != exampleOffering || c.Tier != "standard" ||
		c.AccountID != "5b0e9c1a-2d3f-4a5b-8c7d-9e0f1a2b3c4d" {
		t.Fatalf("the example's ticket claims %+v", c)
	}
}

// The contract's example is the test data, byte for byte, so that the document cannot drift
// from what the code accepts.
func TestContractShowsTheExample(t *testing.T) {
	doc, err := os.ReadFile("CONTRACT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("\n## Example\n"))
	if !ok {
		t.Fatal("CONTRACT.md has no '## Example' section")
	}
	_, block, ok := bytes.Cut(after, []byte("```json\n"))
	if !ok {
		t.Fatal("the Example section of CONTRACT.md has no ```json block")
	}
	block, _, ok = bytes.Cut(block, []byte("```\n"))
	if !ok {
		t.Fatal("the ```json block of CONTRACT.md is not closed")
	}
	if example := readExample(t); !bytes.Equal(block, example) {
		t.Fatalf("CONTRACT.md's example differs from testdata/usage-event.example.json:\n%s", block)
	}
}

func TestRoundTrip(t *testing.T) {
	// A local clock reading with nanoseconds: the event keeps UTC microseconds.
	at := time.Date(2026, 11, 30, 23, 59, 59, 999_999_999, time.FixedZone("CET", 3600))
	u := exampleEvent(t).Data
	ev := NewEvent("evt-1", exampleProvider, exampleOffering, at, u)
	if want := time.Date(2026, 11, 30, 22, 59, 59, 999_999_000, time.UTC); ev.Time != want {
		t.Fatalf("NewEvent time = %v, want %v", ev.Time, want)
	}
	if ev.Subject != u.RequestID || ev.Source != "gpuagent/"+exampleProvider+"/"+exampleOffering {
		t.Fatalf("NewEvent envelope = %+v", ev)
	}
	raw, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode(Encode(ev)): %v\n%s", err, raw)
	}
	if got != ev {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, ev)
	}
	if err := Validate(got, exampleSubject, at); err != nil {
		t.Fatal(err)
	}

	// The example re-encoded compactly decodes to the same event.
	ex := exampleEvent(t)
	raw, err = Encode(ex)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Decode(raw); err != nil || again != ex {
		t.Fatalf("example round trip: %+v, %v", again, err)
	}
}

// exampleWith returns the example after edit has changed its envelope and data.
func exampleWith(t *testing.T, edit func(env, data map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(readExample(t), &env); err != nil {
		t.Fatal(err)
	}
	edit(env, env["data"].(map[string]any))
	raw, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// exampleReplaced returns the example text with old replaced, once, by new.
func exampleReplaced(t *testing.T, old, new string) []byte {
	t.Helper()
	ex := string(readExample(t))
	if !strings.Contains(ex, old) {
		t.Fatalf("the example has no %q", old)
	}
	return []byte(strings.Replace(ex, old, new, 1))
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name string
		raw  []byte
		want RejectReason // "" when the event must decode and validate
	}{
		{"the example", readExample(t), ""},
		{"compact", exampleWith(t, func(env, data map[string]any) {}), ""},
		{"with an extension attribute", exampleWith(t, func(env, data map[string]any) {
			env["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			env["sampled"] = true
		}), ""},
		{"with an escaped member name", exampleReplaced(t, `"specversion"`, `"spec\u0076ersion"`), ""},

		{"over the size limit", exampleWith(t, func(env, data map[string]any) {
			env["padding"] = strings.Repeat("x", MaxEventBytes)
		}), RejectOversized},

		{"not UTF-8", exampleReplaced(t, "Llama", "L\xffama"), RejectMalformed},
		{"not JSON", []byte(`{"specversion": "1.0",`), RejectMalformed},
		{"empty", nil, RejectMalformed},
		{"an array", []byte(`[{"specversion": "1.0"}]`), RejectMalformed},
		{"a string", []byte(`"gpumarket.usage.v1"`), RejectMalformed},
		{"data after the object", append(readExample(t), []byte(`{}`)...), RejectMalformed},
		{"an envelope member twice", exampleReplaced(t, `"id": `, `"id": "evt-2", "id": `), RejectMalformed},
		{"a data member twice", exampleReplaced(t, `"status": "ok"`, `"status": "ok", "status": "error"`), RejectMalformed},
		{"a member twice, once escaped", exampleReplaced(t, `"id": `, `"\u0069d": "evt-2", "id": `), RejectMalformed},

		{"no id", exampleWith(t, func(env, data map[string]any) { delete(env, "id") }), RejectSchema},
		{"no time", exampleWith(t, func(env, data map[string]any) { delete(env, "time") }), RejectSchema},
		{"no data", exampleWith(t, func(env, data map[string]any) { delete(env, "data") }), RejectSchema},
		{"no datacontenttype", exampleWith(t, func(env, data map[string]any) { delete(env, "datacontenttype") }), RejectSchema},
		{"no energy_source", exampleWith(t, func(env, data map[string]any) { delete(data, "energy_source") }), RejectSchema},
		{"no ticket", exampleWith(t, func(env, data map[string]any) { delete(data, "ticket") }), RejectSchema},
		{"an unknown data field", exampleWith(t, func(env, data map[string]any) { data["cost_usd"] = 0.01 }), RejectSchema},
		{"an attribute in capitals", exampleReplaced(t, `"specversion"`, `"SpecVersion"`), RejectSchema},
		{"a data field in capitals", exampleReplaced(t, `"input_tokens"`, `"Input_Tokens"`), RejectSchema},
		{"binary data", exampleWith(t, func(env, data map[string]any) {
			delete(env, "data")
			env["data_base64"] = "e30="
		}), RejectSchema},
		{"an extension holding an object", exampleWith(t, func(env, data map[string]any) { env["ext"] = map[string]any{} }), RejectSchema},
		{"an extension holding null", exampleWith(t, func(env, data map[string]any) { env["ext"] = nil }), RejectSchema},
		{"specversion 0.3", exampleWith(t, func(env, data map[string]any) { env["specversion"] = "0.3" }), RejectSchema},
		{"another type", exampleWith(t, func(env, data map[string]any) { env["type"] = "gpumarket.usage.v2" }), RejectSchema},
		{"another content type", exampleWith(t, func(env, data map[string]any) { env["datacontenttype"] = "text/plain" }), RejectSchema},
		{"a null id", exampleWith(t, func(env, data map[string]any) { env["id"] = nil }), RejectSchema},
		{"a numeric id", exampleWith(t, func(env, data map[string]any) { env["id"] = 42 }), RejectSchema},
		{"a time that is not RFC 3339", exampleWith(t, func(env, data map[string]any) { env["time"] = "30 Nov 2026 12:00" }), RejectSchema},
		{"a numeric time", exampleWith(t, func(env, data map[string]any) { env["time"] = 1796040001 }), RejectSchema},
		{"data that is a string", exampleWith(t, func(env, data map[string]any) { env["data"] = "{}" }), RejectSchema},
		{"tokens as a string", exampleWith(t, func(env, data map[string]any) { data["input_tokens"] = "512" }), RejectSchema},
		{"fractional tokens", exampleWith(t, func(env, data map[string]any) { data["input_tokens"] = 512.5 }), RejectSchema},
		{"tokens with an exponent", exampleReplaced(t, `"input_tokens": 512`, `"input_tokens": 5.12e2`), RejectSchema},
		{"tokens past int64", exampleReplaced(t, `"input_tokens": 512`, `"input_tokens": 99999999999999999999`), RejectSchema},
		{"null tokens", exampleWith(t, func(env, data map[string]any) { data["output_tokens"] = nil }), RejectSchema},
		{"a float past float64", exampleReplaced(t, `"energy_j": 2861.5`, `"energy_j": 1e999`), RejectSchema},
		{"a boolean duration", exampleWith(t, func(env, data map[string]any) { data["duration_ms"] = true }), RejectSchema},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := Decode(tc.raw)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if err := Validate(ev, exampleSubject, exampleNow); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("Decode = %v, want reason %q", err, tc.want)
			}
			if ev != (UsageEvent{}) {
				t.Fatalf("a rejected event came back: %+v", ev)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	longID := strings.Repeat("a", MaxIDLength)
	cases := []struct {
		name    string
		edit    func(ev *UsageEvent)
		subject string        // exampleSubject when empty
		now     time.Duration // after the event's time; exampleNow when zero
		want    RejectReason
	}{
		{name: "the example"},
		{name: "ids at the limit", edit: func(ev *UsageEvent) {
			ev.ID = longID
			ev.Data.RequestID, ev.Subject = longID, longID
		}},
		{name: "a model of 200 four-byte characters", edit: func(ev *UsageEvent) { ev.Data.Model = strings.Repeat("𝕃", MaxModelLength) }},
		{name: "tokens at the limit", edit: func(ev *UsageEvent) { ev.Data.InputTokens, ev.Data.OutputTokens = MaxTokens, MaxTokens }},
		{name: "a failed request with no tokens", edit: func(ev *UsageEvent) {
			ev.Data.Status, ev.Data.InputTokens, ev.Data.CachedInputTokens, ev.Data.OutputTokens, ev.Data.TTFTMillis = StatusError, 0, 0, 0, 0
		}},
		{name: "a canceled request, energy measured", edit: func(ev *UsageEvent) {
			ev.Data.Status, ev.Data.EnergySource = StatusCanceled, EnergyMeasured
		}},
		{name: "energy from a simulated sensor", edit: func(ev *UsageEvent) { ev.Data.EnergySource = EnergySimulated }},
		{name: "ttft equal to duration", edit: func(ev *UsageEvent) { ev.Data.TTFTMillis = ev.Data.DurationMillis }},
		{name: "duration at the limit", edit: func(ev *UsageEvent) { ev.Data.DurationMillis = MaxDurationMillis }},
		{name: "energy at the limit", edit: func(ev *UsageEvent) { ev.Data.EnergyJoules = MaxEnergyJoules }},

		{name: "another specversion", edit: func(ev *UsageEvent) { ev.SpecVersion = "1.1" }, want: RejectSchema},
		{name: "another type", edit: func(ev *UsageEvent) { ev.Type = "gpumarket.usage.v0" }, want: RejectSchema},
		{name: "another content type", edit: func(ev *UsageEvent) { ev.DataContentType = "" }, want: RejectSchema},
		{name: "no id", edit: func(ev *UsageEvent) { ev.ID = "" }, want: RejectSchema},
		{name: "an id too long", edit: func(ev *UsageEvent) { ev.ID = longID + "a" }, want: RejectSchema},
		{name: "an id with a line break", edit: func(ev *UsageEvent) { ev.ID = "evt\r\nX-Injected: 1" }, want: RejectSchema},
		{name: "a source of another agent kind", edit: func(ev *UsageEvent) {
			ev.Source = "/gpuagent/" + exampleProvider + "/" + exampleOffering
		}, want: RejectSchema},
		{name: "a source without offering", edit: func(ev *UsageEvent) { ev.Source = "gpuagent/" + exampleProvider }, want: RejectSchema},
		{name: "a source with a dot", edit: func(ev *UsageEvent) { ev.Source = "gpuagent/a.b/" + exampleOffering }, want: RejectSchema},
		{name: "a source with an extra segment", edit: func(ev *UsageEvent) {
			ev.Source = "gpuagent/" + exampleProvider + "/" + exampleOffering + "/x"
		}, want: RejectSchema},
		{name: "no time", edit: func(ev *UsageEvent) { ev.Time = time.Time{} }, want: RejectSchema},
		{name: "a subject that is not the request", edit: func(ev *UsageEvent) { ev.Subject = "req_other" }, want: RejectSchema},
		{name: "no request id", edit: func(ev *UsageEvent) { ev.Data.RequestID, ev.Subject = "", "" }, want: RejectSchema},
		{name: "a request id with a space", edit: func(ev *UsageEvent) { ev.Data.RequestID, ev.Subject = "req 1", "req 1" }, want: RejectSchema},
		{name: "no offering id", edit: func(ev *UsageEvent) { ev.Data.OfferingID = "" }, want: RejectSchema},
		{name: "an offering id with a wildcard", edit: func(ev *UsageEvent) { ev.Data.OfferingID = "*" }, want: RejectSchema},
		{name: "no model", edit: func(ev *UsageEvent) { ev.Data.Model = "" }, want: RejectSchema},
		{name: "a model too long", edit: func(ev *UsageEvent) { ev.Data.Model = strings.Repeat("m", MaxModelLength+1) }, want: RejectSchema},
		{name: "a model with a direction override", edit: func(ev *UsageEvent) { ev.Data.Model = "llama\u202egpt" }, want: RejectSchema},
		{name: "a model with a line break", edit: func(ev *UsageEvent) { ev.Data.Model = "llama\n8b" }, want: RejectSchema},
		{name: "a model not UTF-8", edit: func(ev *UsageEvent) { ev.Data.Model = "llama\xff" }, want: RejectSchema},
		{name: "negative input tokens", edit: func(ev *UsageEvent) { ev.Data.InputTokens = -1 }, want: RejectSchema},
		{name: "too many input tokens", edit: func(ev *UsageEvent) { ev.Data.InputTokens = MaxTokens + 1 }, want: RejectSchema},
		{name: "negative output tokens", edit: func(ev *UsageEvent) { ev.Data.OutputTokens = -1 }, want: RejectSchema},
		{name: "too many output tokens", edit: func(ev *UsageEvent) { ev.Data.OutputTokens = MaxTokens + 1 }, want: RejectSchema},
		{name: "negative ttft", edit: func(ev *UsageEvent) { ev.Data.TTFTMillis = -1 }, want: RejectSchema},
		{name: "ttft after the end", edit: func(ev *UsageEvent) { ev.Data.TTFTMillis = ev.Data.DurationMillis + 1 }, want: RejectSchema},
		{name: "NaN ttft", edit: func(ev *UsageEvent) { ev.Data.TTFTMillis = math.NaN() }, want: RejectSchema},
		{name: "negative duration", edit: func(ev *UsageEvent) { ev.Data.TTFTMillis, ev.Data.DurationMillis = 0, -1 }, want: RejectSchema},
		{name: "a duration too long", edit: func(ev *UsageEvent) { ev.Data.DurationMillis = MaxDurationMillis + 1 }, want: RejectSchema},
		{name: "NaN duration", edit: func(ev *UsageEvent) { ev.Data.DurationMillis = math.NaN() }, want: RejectSchema},
		{name: "infinite duration", edit: func(ev *UsageEvent) { ev.Data.DurationMillis = math.Inf(1) }, want: RejectSchema},
		{name: "negative energy", edit: func(ev *UsageEvent) { ev.Data.EnergyJoules = -0.1 }, want: RejectSchema},
		{name: "too much energy", edit: func(ev *UsageEvent) { ev.Data.EnergyJoules = MaxEnergyJoules * 2 }, want: RejectSchema},
		{name: "NaN energy", edit: func(ev *UsageEvent) { ev.Data.EnergyJoules = math.NaN() }, want: RejectSchema},
		{name: "an unknown energy source", edit: func(ev *UsageEvent) { ev.Data.EnergySource = "guessed" }, want: RejectSchema},
		{name: "an energy source in capitals", edit: func(ev *UsageEvent) { ev.Data.EnergySource = "Simulated" }, want: RejectSchema},
		{name: "an unknown status", edit: func(ev *UsageEvent) { ev.Data.Status = "done" }, want: RejectSchema},
		{name: "a status in capitals", edit: func(ev *UsageEvent) { ev.Data.Status = "OK" }, want: RejectSchema},

		{name: "no ticket", edit: func(ev *UsageEvent) { ev.Data.Ticket = "" }, want: RejectTicketInvalid},
		{name: "a ticket too long", edit: func(ev *UsageEvent) { ev.Data.Ticket = strings.Repeat("t", ticket.MaxLength+1) }, want: RejectTicketInvalid},
		{name: "a ticket with a space", edit: func(ev *UsageEvent) { ev.Data.Ticket = "abc def" }, want: RejectTicketInvalid},

		{name: "a subject of another scheme", subject: events.HeartbeatSubject(exampleProvider, exampleOffering), want: RejectSubjectMismatch},
		{name: "a subject with one token too few", subject: events.Child(events.UsagePrefix, exampleOffering), want: RejectSubjectMismatch},
		{name: "a subject with one token too many", subject: events.Child(exampleSubject, "x"), want: RejectSubjectMismatch},
		{name: "another provider's subject", subject: events.UsageSubject("another-provider", exampleOffering), want: RejectSubjectMismatch},
		{name: "another offering's subject", subject: events.UsageSubject(exampleProvider, "another-offering"), want: RejectSubjectMismatch},
		{name: "data for another offering than source and subject", edit: func(ev *UsageEvent) {
			ev.Data.OfferingID = "another-offering"
		}, want: RejectSubjectMismatch},

		{name: "five minutes ahead", now: -MaxClockSkew},
		{name: "more than five minutes ahead", now: -MaxClockSkew - time.Millisecond, want: RejectFuture},
		{name: "seven days old", now: MaxEventAge},
		{name: "more than seven days old", now: MaxEventAge + time.Millisecond, want: RejectStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := exampleEvent(t)
			if tc.edit != nil {
				tc.edit(&ev)
			}
			subject, now := exampleSubject, exampleNow
			if tc.subject != "" {
				subject = tc.subject
			}
			if tc.now != 0 {
				now = ev.Time.Add(tc.now)
			}
			err := Validate(ev, subject, now)
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("Validate = %v, want reason %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), string(tc.want)) {
				t.Fatalf("the message %q does not name the reason", err)
			}
		})
	}
}

func TestVerifyTicket(t *testing.T) {
	signer, err := ticket.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other, err := ticket.NewSigner([]byte(strings.Repeat("o", 32)))
	if err != nil {
		t.Fatal(err)
	}
	issued := exampleNow.Add(-10 * time.Second)
	claims := ticket.Claims{RequestID: exampleRequest, AccountID: "acc-1", APIKeyID: "key-1", OfferingID: exampleOffering,
		Tier: "batch", IssuedAt: issued}
	sign := func(s *ticket.Signer, edit func(c *ticket.Claims)) string {
		c := claims
		if edit != nil {
			edit(&c)
		}
		tok, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cases := []struct {
		name   string
		ticket string
		edit   func(ev *UsageEvent)
		now    time.Time
		want   RejectReason
	}{
		{name: "valid", ticket: sign(signer, nil)},
		{name: "a request that took the whole ticket's life", ticket: sign(signer, nil), edit: func(ev *UsageEvent) {
			ev.Data.DurationMillis = float64(exampleNow.Sub(issued) / time.Millisecond)
		}},
		{name: "an agent clock a little behind", ticket: sign(signer, nil), edit: func(ev *UsageEvent) {
			ev.Time = issued.Add(-MaxClockSkew + time.Second)
			ev.Data.DurationMillis = 1000
		}},
		{name: "another offering's ticket", ticket: sign(signer, func(c *ticket.Claims) { c.OfferingID = "another-offering" }), want: RejectTicketOffering},
		{name: "another request's ticket", ticket: sign(signer, func(c *ticket.Claims) { c.RequestID = "req_other" }), want: RejectTicketInvalid},
		{name: "signed with another key", ticket: sign(other, nil), want: RejectTicketInvalid},
		{name: "garbled", ticket: "not-a-ticket", want: RejectTicketInvalid},
		{name: "expired", ticket: sign(signer, nil), now: issued.Add(MaxEventAge + time.Second), want: RejectTicketInvalid},
		{name: "issued after the meter's clock", ticket: sign(signer, nil), now: issued.Add(-time.Minute), want: RejectTicketInvalid},
		{name: "a request that started before it was routed", ticket: sign(signer, nil), edit: func(ev *UsageEvent) {
			ev.Data.DurationMillis = float64((exampleNow.Sub(issued) + MaxClockSkew + time.Second) / time.Millisecond)
		}, want: RejectTicketInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := NewEvent("evt-1", exampleProvider, exampleOffering, exampleNow, exampleEvent(t).Data)
			ev.Data.Ticket = tc.ticket
			ev.Data.TTFTMillis = 0
			if tc.edit != nil {
				tc.edit(&ev)
			}
			if err := Validate(ev, exampleSubject, exampleNow); err != nil {
				t.Fatalf("the event does not validate: %v", err)
			}
			now := exampleNow
			if !tc.now.IsZero() {
				now = tc.now
			}
			c, err := VerifyTicket(ev, signer, now, MaxEventAge)
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("VerifyTicket = %v, want reason %q", err, tc.want)
			}
			want := claims
			if tc.want != "" {
				want = ticket.Claims{}
			}
			if c != want {
				t.Fatalf("claims = %+v, want %+v", c, want)
			}
		})
	}
}

func TestRejection(t *testing.T) {
	_, err := Decode([]byte("{"))
	wrapped := fmt.Errorf("meter batch 7: %w", err)
	if got := ReasonOf(wrapped); got != RejectMalformed {
		t.Fatalf("ReasonOf through a wrap = %q", got)
	}
	var r *Rejection
	if !errors.As(wrapped, &r) || r.Detail == "" {
		t.Fatalf("errors.As = %+v", r)
	}
	if got := (&Rejection{Reason: RejectDuplicate, Detail: "event evt-1 is stored"}).Error(); got != "usage event rejected (duplicate): event evt-1 is stored" {
		t.Fatalf("Error() = %q", got)
	}
	if ReasonOf(errors.New("connection reset")) != "" || ReasonOf(nil) != "" {
		t.Fatal("a reason for an error that is no rejection")
	}
}

// The largest event Validate passes encodes well under MaxEventBytes: the bound refuses
// garbage, never a valid event.
func TestLargestEventFits(t *testing.T) {
	id := strings.Repeat("i", MaxIDLength)
	u := Usage{
		RequestID:         id,
		Ticket:            strings.Repeat(`"`, ticket.MaxLength), // each one escaped: the longest ticket encoding
		OfferingID:        id,
		Model:             strings.Repeat("𝕃", MaxModelLength),
		InputTokens:       MaxTokens,
		CachedInputTokens: MaxTokens,
		OutputTokens:      MaxTokens,
		TTFTMillis:        0.1234567890123456,
		DurationMillis:    12345678.90123456,
		EnergyJoules:      123456789.0123456,
		EnergySource:      EnergyEstimated,
		Status:            StatusCanceled,
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	ev := NewEvent(id, id, id, at, u)
	if err := Validate(ev, events.UsageSubject(id, id), at); err != nil {
		t.Fatal(err)
	}
	raw, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the largest valid event encodes to %d bytes", len(raw))
	if len(raw) > MaxEventBytes/2 {
		t.Fatalf("the largest valid event encodes to %d bytes, more than half of MaxEventBytes", len(raw))
	}
	if got, err := Decode(raw); err != nil || got != ev {
		t.Fatalf("round trip: %v", err)
	}
}

func TestEncodeRefusesOversized(t *testing.T) {
	ev := exampleEvent(t)
	ev.Data.Model = strings.Repeat("m", MaxEventBytes)
	if _, err := Encode(ev); ReasonOf(err) != RejectOversized {
		t.Fatalf("Encode = %v, want an oversized rejection", err)
	}
}

// Cached input tokens are optional, part of the input and never more: an event without them
// reports none, by either decoder; one with more of them than input tokens is refused.
func TestCachedInputTokens(t *testing.T) {
	example := readExample(t)
	without := bytes.Replace(example, []byte("    \"cached_input_tokens\": 384,\n"), nil, 1)
	if bytes.Equal(without, example) {
		t.Fatal("the example holds no cached_input_tokens")
	}
	compactWithout, err := Encode(func() UsageEvent { ev := exampleEvent(t); ev.Data.CachedInputTokens = 0; return ev }())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(compactWithout, []byte("cached_input_tokens")) {
		t.Fatalf("an event with no cached token is written with the field: %s", compactWithout)
	}
	for _, raw := range [][]byte{without, compactWithout} {
		ev, err := Decode(raw)
		if err != nil {
			t.Fatalf("an event without cached_input_tokens does not decode: %v", err)
		}
		if ev.Data.CachedInputTokens != 0 || ev.Data.InputTokens != 512 {
			t.Fatalf("decoded %d cached of %d input tokens, want 0 of 512", ev.Data.CachedInputTokens, ev.Data.InputTokens)
		}
		if err := Validate(ev, exampleSubject, exampleNow); err != nil {
			t.Fatalf("an event without cached_input_tokens does not validate: %v", err)
		}
	}
	compact, err := Encode(exampleEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range [][]byte{example, compact} {
		if ev, ok := decodePlain(raw); !ok || ev.Data.CachedInputTokens != 384 {
			t.Fatalf("decodePlain: ok %v, %d cached tokens, want 384", ok, ev.Data.CachedInputTokens)
		}
		if ev, err := decodeStrict(raw); err != nil || ev.Data.CachedInputTokens != 384 {
			t.Fatalf("decodeStrict: %v, %d cached tokens, want 384", err, ev.Data.CachedInputTokens)
		}
	}
	twice := bytes.Replace(example, []byte(`"cached_input_tokens": 384,`), []byte(`"cached_input_tokens": 384, "cached_input_tokens": 1,`), 1)
	if _, err := Decode(twice); ReasonOf(err) != RejectMalformed {
		t.Fatalf("cached_input_tokens twice: %v, want %s", err, RejectMalformed)
	}
	fraction := bytes.Replace(example, []byte(`"cached_input_tokens": 384`), []byte(`"cached_input_tokens": 3.84e2`), 1)
	if _, err := Decode(fraction); ReasonOf(err) != RejectSchema {
		t.Fatalf("cached_input_tokens 3.84e2: %v, want %s", err, RejectSchema)
	}
	for _, cached := range []int64{513, -1} {
		ev := exampleEvent(t)
		ev.Data.CachedInputTokens = cached
		if err := Validate(ev, exampleSubject, exampleNow); ReasonOf(err) != RejectSchema ||
			!strings.Contains(err.Error(), "cached_input_tokens") {
			t.Fatalf("%d cached of 512 input tokens: %v, want %s", cached, err, RejectSchema)
		}
	}
	ev := exampleEvent(t)
	ev.Data.CachedInputTokens = ev.Data.InputTokens
	if err := Validate(ev, exampleSubject, exampleNow); err != nil {
		t.Fatalf("every input token cached: %v", err)
	}
}
