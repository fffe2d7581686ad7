package rigwire

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

// Several goroutines hand an answer's messages on at once, so they may reach a call out of their order: the call
// puts them back in order, and still refuses a message that came twice or a rig that runs past its window.
func TestAnAnswerIsPutBackInOrder(t *testing.T) {
	c := &Caller{opts: Options{}.withDefaults()}
	newCall := func() *call { return &call{c: c, wake: make(chan struct{}, 1)} }

	k := newCall()
	k.deliver(replyMsg{seq: 2, flags: flagEnd, data: []byte("c")})
	k.deliver(replyMsg{seq: 1, data: []byte("b")})
	if k.head != nil || len(k.chunks) != 0 {
		t.Fatal("messages ahead of their turn were taken before the first")
	}
	k.deliver(replyMsg{seq: 0, flags: flagAccept | flagHead, control: "ctl", status: http.StatusOK, header: http.Header{}, data: []byte("a")})
	if k.head == nil || !k.end || k.err != nil || len(k.ahead) != 0 {
		t.Fatalf("after the first message: head %v, end %v, err %v, %d ahead", k.head != nil, k.end, k.err, len(k.ahead))
	}
	body, err := io.ReadAll((*callBody)(k))
	if err != nil || string(body) != "abc" {
		t.Fatalf("body %q, %v; want abc", body, err)
	}

	k = newCall()
	k.deliver(replyMsg{seq: 1, data: []byte("b")})
	k.deliver(replyMsg{seq: 1, data: []byte("b")})
	if !errors.Is(k.err, ErrOutOfOrder) {
		t.Fatalf("a message that came twice: %v, want ErrOutOfOrder", k.err)
	}

	k = newCall()
	k.deliver(replyMsg{seq: 0, flags: flagAccept | flagHead, control: "ctl", status: http.StatusOK, header: http.Header{}})
	k.deliver(replyMsg{seq: 0, data: []byte("again")})
	if !errors.Is(k.err, ErrOutOfOrder) {
		t.Fatalf("a message older than the one due: %v, want ErrOutOfOrder", k.err)
	}

	k = newCall()
	chunk := make([]byte, ChunkSize)
	for seq := uint64(1); k.err == nil && seq < 100; seq++ {
		k.deliver(replyMsg{seq: seq, data: chunk})
	}
	if !errors.Is(k.err, ErrOutOfOrder) || k.aheadBytes > c.opts.Window+2*ChunkSize {
		t.Fatalf("a rig sending past its window ahead of the first message: %v with %d bytes held", k.err, k.aheadBytes)
	}
}
