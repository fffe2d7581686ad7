package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// TestAChunkIsReadWhateverLinesComeWithItsData: an event's id, name or a comment beside its one data line does
// not hide the chunk from the gateway (package sse reads the data line wherever it is): its output is counted,
// its usage read, the usage chunk the client did not ask for dropped and "usage":null taken out; a [DONE] after a
// comment ends the stream, and nothing after it is read.
func TestAChunkIsReadWhateverLinesComeWithItsData(t *testing.T) {
	stream := "id: 1\n" + `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}` + "\n\n" +
		"event: chunk\r\n" + `data: {"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}` + "\r\n\r\n" +
		": end\ndata: [DONE]\n\n"
	rec := httptest.NewRecorder()
	w, _ := httpx.NewDeadlineWriter(rec, time.Minute)
	g := &Gateway{now: time.Now}
	var o outcome
	body := io.MultiReader(strings.NewReader(stream), iotest.ErrReader(errors.New("read past [DONE]")))
	if err := g.relayStream(w, body, true, &o, nil); err != nil {
		t.Fatal(err)
	}
	want := "id: 1\n" + `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + ": end\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Errorf("the client got %q, want %q", rec.Body.String(), want)
	}
	if o.outputBytes != 2 || o.outputChunks != 1 || o.usage == nil || o.usage.Input != 5 || o.usage.Output != 1 {
		t.Errorf("read %d bytes in %d chunks, usage %+v; want 2 in 1, 5 in and 1 out", o.outputBytes, o.outputChunks, o.usage)
	}
}

// discardResponse is a client that reads everything at once: what a benchmark of the relay writes to.
type discardResponse struct{ header http.Header }

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}
func (d *discardResponse) Flush()                      {}

// benchStream is a chat completion stream as vLLM writes it when the gateway asked for its usage: chunks tokens
// of output, each with "usage":null, then the usage chunk and [DONE].
func benchStream(chunks int) []byte {
	var b strings.Builder
	for i := range chunks {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764680000,"model":"m",`+
			`"choices":[{"index":0,"delta":{"content":" token%d"},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764680000,"model":"m","choices":[],` +
		`"usage":{"prompt_tokens":16,"completion_tokens":` + fmt.Sprint(chunks) + `,"total_tokens":` + fmt.Sprint(16+chunks) + `}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// BenchmarkRelayStream relays a streamed answer of 256 chunks as a client that did not ask for usage gets it: the
// usage chunk dropped, "usage":null taken out of the others. Its time and allocations per op divided by 258 are
// the relay's cost per frame.
func BenchmarkRelayStream(b *testing.B) {
	stream := benchStream(256)
	g := &Gateway{now: time.Now}
	w, _ := httpx.NewDeadlineWriter(&discardResponse{header: http.Header{}}, time.Minute)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var o outcome
		if err := g.relayStream(w, bytes.NewReader(stream), true, &o, nil); err != nil {
			b.Fatal(err)
		}
		if o.outputChunks != 256 || o.usage == nil {
			b.Fatalf("relayed %d chunks, usage %v", o.outputChunks, o.usage)
		}
	}
}
