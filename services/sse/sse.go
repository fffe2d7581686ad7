// Package sse reads streams of server-sent events (text/event-stream) frame by frame, as the rig's agent and the
// gateway relay them: OpenAI's chat and text completion streams, Anthropic's Messages streams and OpenAI's
// Responses streams.
//
// A frame is the lines of one event up to and including the blank line ("\n" or "\r\n") that ends it, exactly as
// they came: every byte the Reader reads is in exactly one frame, in order, so that a relay that writes each frame
// it is given writes the stream untouched. A run of blank lines gives frames that are a blank line alone, and a
// stream that stops without a blank line gives its last frame as far as it got. What a relay reads in a frame
// (Frame.Data, Frame.Event, Frame.Done) is read as the engines write their events: at most one data line, whose
// payload is one JSON value or [DONE].
package sse

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// bufferSize is the Reader's read buffer: a frame longer than it is gathered from several reads.
const bufferSize = 32 << 10

// Reader reads the frames of a stream of server-sent events.
type Reader struct {
	br       bufio.Reader // held by value, so that a Reader on its caller's stack allocates only the buffers
	maxFrame int
	frame    []byte // the frame Next returned last, reused for the next
	err      error  // what ended the stream, returned by every later Next
}

// NewReader returns a Reader of r whose frames are at most maxFrame bytes: a longer one ends the stream with a
// *TooLargeError, so that an upstream cannot make a relay hold an event without bound.
func NewReader(r io.Reader, maxFrame int) *Reader {
	return newReaderSize(r, bufferSize, maxFrame)
}

func newReaderSize(r io.Reader, size, maxFrame int) *Reader {
	return &Reader{br: *bufio.NewReaderSize(r, size), maxFrame: maxFrame}
}

// TooLargeError is a frame longer than the Reader's limit.
type TooLargeError struct {
	Max int // the limit, in bytes
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a server-sent event longer than %d bytes", e.Max)
}

// Next returns the next frame. It is valid until the next call: the Reader reuses its bytes. A stream that ends
// in the middle of a frame gives that frame first, then the end. At the stream's end Next returns io.EOF; when
// the read failed, or a frame was too large, that error; and the same at every later call.
func (r *Reader) Next() (Frame, error) {
	if r.err != nil {
		return nil, r.err
	}
	r.frame = r.frame[:0]
	midLine := false // the last read stopped short of the line's end, its buffer full
	for {
		line, err := r.br.ReadSlice('\n')
		r.frame = append(r.frame, line...)
		if len(r.frame) > r.maxFrame {
			r.err = &TooLargeError{Max: r.maxFrame}
			return nil, r.err
		}
		switch {
		case err == bufio.ErrBufferFull:
			midLine = true
		case err != nil:
			r.err = err
			if len(r.frame) == 0 {
				return nil, err
			}
			return r.frame, nil
		case !midLine && isBlankLine(line):
			return r.frame, nil
		default:
			midLine = false
		}
	}
}

// isBlankLine is true for a whole line that ends an event: "\n" or "\r\n".
func isBlankLine(line []byte) bool {
	return len(line) == 1 || len(line) == 2 && line[0] == '\r'
}

// Frame is one event's bytes as they came, its ending blank line included when it had one.
type Frame []byte

// Data finds the payload of the frame's data line, when the frame has exactly one: its offsets in the frame, after
// "data:" and its optional space, before the line's end ("\n" or "\r\n"). Other lines (an event, an id, a comment)
// may come before or after it. A frame with no data line, or with several (an event whose data spans lines, which
// the engines do not send), has none.
func (f Frame) Data() (from, to int, ok bool) {
	for start := 0; start < len(f); {
		end := bytes.IndexByte(f[start:], '\n')
		if end < 0 {
			end = len(f)
		} else {
			end += start
		}
		if bytes.HasPrefix(f[start:end], dataField) {
			if ok {
				return 0, 0, false
			}
			ok = true
			from, to = start+len(dataField), end
			if from < to && f[from] == ' ' {
				from++
			}
			if from < to && f[to-1] == '\r' {
				to--
			}
		}
		start = end + 1
	}
	return from, to, ok
}

// Payload is the payload of the frame's one data line (Data), nil without one.
func (f Frame) Payload() []byte {
	from, to, ok := f.Data()
	if !ok {
		return nil
	}
	return f[from:to]
}

// Event is the value of the frame's first event line, without the spaces around it; nil without one.
func (f Frame) Event() []byte {
	for line := range bytes.Lines(f) {
		if rest, ok := bytes.CutPrefix(line, eventField); ok {
			return bytes.TrimSpace(rest)
		}
	}
	return nil
}

// Done is true for the frame that ends an OpenAI stream: its one data line is [DONE].
func (f Frame) Done() bool {
	from, to, ok := f.Data()
	return ok && bytes.Equal(bytes.TrimSpace(f[from:to]), done)
}

var (
	dataField  = []byte("data:")
	eventField = []byte("event:")
	done       = []byte("[DONE]")
)
