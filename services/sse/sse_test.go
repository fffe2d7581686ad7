package sse

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every frame of stream, each copied, and the error that ended it.
func readAll(r *Reader) ([]string, error) {
	var frames []string
	for {
		f, err := r.Next()
		if err != nil {
			return frames, err
		}
		frames = append(frames, string(f))
	}
}

// TestFramesAreTheEventsAsTheyCame: a stream splits into its events, each with the blank line that ends it, and
// nothing is lost or added between them, whatever the read buffer and however the bytes arrive.
func TestFramesAreTheEventsAsTheyCame(t *testing.T) {
	long := "data: " + strings.Repeat("x", 40) // longer than the 16-byte buffer below
	for _, c := range []struct {
		name   string
		stream string
		want   []string
	}{
		{"an OpenAI stream", "data: {\"a\":1}\n\ndata: [DONE]\n\n",
			[]string{"data: {\"a\":1}\n\n", "data: [DONE]\n\n"}},
		{"blank lines with \\r\\n", "data: {}\r\n\r\ndata: {}\r\n\r\n",
			[]string{"data: {}\r\n\r\n", "data: {}\r\n\r\n"}},
		{"an event line before the data", "event: message_start\ndata: {}\n\nevent: ping\ndata: {}\n\n",
			[]string{"event: message_start\ndata: {}\n\n", "event: ping\ndata: {}\n\n"}},
		{"a comment is a frame of its own", ": keep-alive\n\ndata: {}\n\n",
			[]string{": keep-alive\n\n", "data: {}\n\n"}},
		{"a run of blank lines gives blank frames", "data: {}\n\n\n\r\n",
			[]string{"data: {}\n\n", "\n", "\r\n"}},
		{"a stream that stops mid-event gives what came", "data: {}\n\ndata: {\"a\"",
			[]string{"data: {}\n\n", "data: {\"a\""}},
		{"a stream that stops after a line", "data: {}\n",
			[]string{"data: {}\n"}},
		{"a lone \\r is no line end", "data: a\r\rdata: b\n\n",
			[]string{"data: a\r\rdata: b\n\n"}},
		{"a line longer than the buffer", long + "\n\n",
			[]string{long + "\n\n"}},
		{"a long line's end after a full buffer is no blank line", strings.Repeat("x", 16) + "\n" + "data: {}\n\n",
			[]string{strings.Repeat("x", 16) + "\n" + "data: {}\n\n"}},
		{"nor is its \\r\\n", strings.Repeat("x", 16) + "\r\n" + "data: {}\r\n\r\n",
			[]string{strings.Repeat("x", 16) + "\r\n" + "data: {}\r\n\r\n"}},
		{"an empty stream", "", nil},
	} {
		for _, size := range []int{16, bufferSize} {
			for _, read := range []struct {
				name string
				wrap func(io.Reader) io.Reader
			}{{"whole", func(r io.Reader) io.Reader { return r }}, {"byte by byte", iotest.OneByteReader}} {
				got, err := readAll(newReaderSize(read.wrap(strings.NewReader(c.stream)), size, 1<<20))
				if !errors.Is(err, io.EOF) || !slices.Equal(got, c.want) {
					t.Errorf("%s (buffer %d, %s): %q, %v; want %q, EOF", c.name, size, read.name, got, err, c.want)
				}
			}
		}
	}
}

// TestAFrameLongerThanTheLimitEndsTheStream: a frame of the limit passes; one byte more is an error that names the
// limit, returned at once, before the frame ends, and at every later call.
func TestAFrameLongerThanTheLimitEndsTheStream(t *testing.T) {
	atLimit := "data: " + strings.Repeat("x", 100-len("data: \n\n")) + "\n\n"
	if len(atLimit) != 100 {
		t.Fatalf("the frame at the limit is %d bytes", len(atLimit))
	}
	got, err := readAll(newReaderSize(strings.NewReader(atLimit+atLimit), 16, 100))
	if !errors.Is(err, io.EOF) || len(got) != 2 {
		t.Errorf("frames of the limit: %d frames, %v; want 2, EOF", len(got), err)
	}

	// The stream never ends: the limit alone stops the read.
	over := io.MultiReader(strings.NewReader(atLimit+"data: "+strings.Repeat("x", 95)), iotest.ErrReader(errors.New("read past the limit")))
	r := newReaderSize(over, 16, 100)
	if f, err := r.Next(); err != nil || string(f) != atLimit {
		t.Fatalf("first frame: %q, %v", f, err)
	}
	for range 2 {
		f, err := r.Next()
		var tooLarge *TooLargeError
		if f != nil || !errors.As(err, &tooLarge) || tooLarge.Max != 100 ||
			err.Error() != "a server-sent event longer than 100 bytes" {
			t.Errorf("the frame past the limit: %q, %v; want a TooLargeError of 100", f, err)
		}
	}
}

// TestAFailedReadEndsTheStreamAfterWhatCame: the frame the failure cut short comes first, then the failure, and
// again at every later call.
func TestAFailedReadEndsTheStreamAfterWhatCame(t *testing.T) {
	broke := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: {}\n\ndata: {\"a\""), iotest.ErrReader(broke)), 1<<20)
	got, err := readAll(r)
	if !errors.Is(err, broke) || !slices.Equal(got, []string{"data: {}\n\n", "data: {\"a\""}) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := r.Next(); !errors.Is(err, broke) {
		t.Errorf("after the failure: %v", err)
	}
	if _, err := NewReader(iotest.ErrReader(broke), 1<<20).Next(); !errors.Is(err, broke) {
		t.Errorf("a stream that fails at once: %v", err)
	}
}

func TestDataIsTheOneDataLinesPayload(t *testing.T) {
	for _, c := range []struct {
		frame string
		want  string // the payload; "-" for none
	}{
		{"data: {\"a\":1}\n\n", `{"a":1}`},
		{"data:{\"a\":1}\r\n\r\n", `{"a":1}`},
		{"data:  two spaces\n\n", " two spaces"},
		{"data: \n\n", ""},
		{"data:\r\n\r\n", ""},
		{"data: \r\n", ""},
		{"data: at the stream's end", "at the stream's end"},
		{"event: x\ndata: [DONE]\n\n", "[DONE]"},
		{": comment\nid: 7\ndata: {}\nretry: 10\n\n", "{}"},
		{": comment\n\n", "-"},
		{"data: a\ndata: b\n\n", "-"},
		{"event: data: x\n\n", "-"},
		{" data: x\n\n", "-"},
		{"data\n\n", "-"},
		{"", "-"},
	} {
		f := Frame(c.frame)
		from, to, ok := f.Data()
		got := "-"
		if ok {
			got = c.frame[from:to]
		}
		payload := f.Payload()
		if got != c.want || ok != (payload != nil) || ok && string(payload) != got {
			t.Errorf("Data(%q) = %q (Payload %q), want %q", c.frame, got, payload, c.want)
		}
	}
}

func TestEventIsTheFirstEventLine(t *testing.T) {
	for frame, want := range map[string]string{
		"event: error\ndata: {\"error\":{}}\n\n":            "error",
		"event:message_stop\r\ndata: {}\r\n\r\n":            "message_stop",
		"data: {\"type\":\"message_stop\"}\n\n":             "",
		": comment\nevent: ping\ndata: {\"type\":\"ping\"}": "ping",
		"event:  spaced \n\n":                               "spaced",
		"event: first\nevent: second\n\n":                   "first",
		"data: event: not one\n\n":                          "",
	} {
		if got := Frame(frame).Event(); string(got) != want {
			t.Errorf("Event(%q) = %q, want %q", frame, got, want)
		}
	}
}

func TestDoneIsTheDataLineDONE(t *testing.T) {
	for frame, want := range map[string]bool{
		"data: [DONE]\n\n":             true,
		"data:[DONE]\r\n\r\n":          true,
		"data: [DONE] \n\n":            true,
		"data: [DONE]":                 true,
		"event: end\ndata: [DONE]\n\n": true,
		"data: [DONE]x\n\n":            false,
		"data: \"[DONE]\"\n\n":         false,
		": [DONE]\n\n":                 false,
		"data: [DONE]\ndata: x\n\n":    false,
		"data: {}\n\n":                 false,
	} {
		if got := Frame(frame).Done(); got != want {
			t.Errorf("Done(%q) = %v, want %v", frame, got, want)
		}
	}
}

// referenceFrames splits a stream the plain way: into lines after each "\n", a frame ending after every line that
// is "\n" or "\r\n"; a stream that stops mid-frame ends with what came.
func referenceFrames(stream string) []string {
	var frames []string
	var frame strings.Builder
	for _, line := range strings.SplitAfter(stream, "\n") {
		frame.WriteString(line)
		if line == "\n" || line == "\r\n" {
			frames = append(frames, frame.String())
			frame.Reset()
		}
	}
	if frame.Len() > 0 {
		frames = append(frames, frame.String())
	}
	return frames
}

// referencePayload is the payload of a frame's one data line, the plain way; ok is false without exactly one.
func referencePayload(frame string) (payload string, ok bool) {
	n := 0
	for _, line := range strings.Split(frame, "\n") {
		if rest, isData := strings.CutPrefix(line, "data:"); isData {
			n++
			rest = strings.TrimPrefix(rest, " ")
			payload = strings.TrimSuffix(rest, "\r")
		}
	}
	return payload, n == 1
}

// referenceEvent is the value of a frame's first event line, the plain way.
func referenceEvent(frame string) string {
	for _, line := range strings.Split(frame, "\n") {
		if rest, ok := strings.CutPrefix(line, "event:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// FuzzReaderMatchesTheReference reads any stream, with any buffer and limit and bytes coming in any pieces, as the
// plain reference does: the same frames, the same payloads, events and [DONE]s, and an error exactly when a frame
// is longer than the limit.
func FuzzReaderMatchesTheReference(f *testing.F) {
	for _, seed := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"event: message_start\r\ndata: {}\r\n\r\n: ping\n\n\n",
		"data: a\ndata: b\n\nevent:  x \nid: 1\ndata:[DONE] \n\n",
		strings.Repeat("y", 40) + "\n" + strings.Repeat("z", 15) + "\r\n\r\n" + "data: tail",
	} {
		f.Add([]byte(seed), uint8(0), uint16(1000), false)
		f.Add([]byte(seed), uint8(3), uint16(20), true)
	}
	f.Fuzz(func(t *testing.T, stream []byte, buffer uint8, maxFrame uint16, oneByte bool) {
		var in io.Reader = bytes.NewReader(stream)
		if oneByte {
			in = iotest.OneByteReader(in)
		}
		r := newReaderSize(in, 16+int(buffer), int(maxFrame))
		for i, want := range referenceFrames(string(stream)) {
			got, err := r.Next()
			if len(want) > int(maxFrame) {
				var tooLarge *TooLargeError
				if !errors.As(err, &tooLarge) {
					t.Fatalf("frame %d of %d bytes, limit %d: %q, %v; want a TooLargeError", i, len(want), maxFrame, got, err)
				}
				return
			}
			if err != nil || string(got) != want {
				t.Fatalf("frame %d: %q, %v; want %q", i, got, err, want)
			}
			payload, ok := referencePayload(want)
			from, to, gotOK := got.Data()
			if gotOK != ok || ok && string(got[from:to]) != payload {
				t.Fatalf("frame %q: Data %d:%d %v, want %q %v", want, from, to, gotOK, payload, ok)
			}
			if ev := referenceEvent(want); string(got.Event()) != ev {
				t.Fatalf("frame %q: Event %q, want %q", want, got.Event(), ev)
			}
			if wantDone := ok && strings.TrimSpace(payload) == "[DONE]"; got.Done() != wantDone {
				t.Fatalf("frame %q: Done %v, want %v", want, got.Done(), wantDone)
			}
		}
		if extra, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the last frame: %q, %v; want EOF", extra, err)
		}
	})
}

// BenchmarkReader reads a chat completion stream of 256 chunks and [DONE]: per op, 257 frames.
func BenchmarkReader(b *testing.B) {
	var s strings.Builder
	for range 256 {
		s.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764680000,"model":"m",` +
			`"choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	s.WriteString("data: [DONE]\n\n")
	stream := []byte(s.String())
	in := bytes.NewReader(stream)
	r := NewReader(in, 8<<20)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		in.Reset(stream)
		r.br.Reset(in)
		r.err = nil
		frames := 0
		for {
			f, err := r.Next()
			if err != nil {
				break
			}
			if from, to, ok := f.Data(); !ok || to <= from || f.Done() != (frames == 256) {
				b.Fatalf("frame %d: %q", frames, f)
			}
			frames++
		}
		if frames != 257 {
			b.Fatalf("%d frames", frames)
		}
	}
}
