package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"
)

// keptInOutbox reads the events an outbox directory holds and no acknowledgement follows, as the next start would
// send them, without changing the directory.
func keptInOutbox(dir string) ([][]byte, error) {
	segs, _, err := (&outbox{dir: dir}).scanDir()
	if err != nil {
		return nil, err
	}
	type kept struct {
		id   string
		body []byte
	}
	var all []kept
	acked := map[string]bool{}
	for _, n := range segs {
		raw, err := os.ReadFile((&outbox{dir: dir}).segmentPath(n))
		if err != nil {
			return nil, err
		}
		for len(raw) >= recordHead {
			kind, size := raw[0], int(binary.BigEndian.Uint32(raw[1:5]))
			if len(raw) < recordHead+size || crc32.Checksum(raw[recordHead:recordHead+size], castagnoli) != binary.BigEndian.Uint32(raw[5:9]) {
				break
			}
			p := raw[recordHead : recordHead+size]
			switch {
			case kind == kindAck:
				acked[string(p)] = true
			case kind == kindEvent && len(p) >= 2 && 2+int(binary.BigEndian.Uint16(p)) <= len(p):
				idLen := int(binary.BigEndian.Uint16(p))
				all = append(all, kept{id: string(p[2 : 2+idLen]), body: bytes.Clone(p[2+idLen:])})
			}
			raw = raw[recordHead+size:]
		}
	}
	var out [][]byte
	for _, k := range all {
		if !acked[k.id] {
			out = append(out, k.body)
		}
	}
	return out, nil
}

// logEvent is an encoded usage event with its id.
func logEvent(t *testing.T, i int) (string, []byte) {
	t.Helper()
	id := fmt.Sprintf("evt_log%04d", i)
	raw, err := usage.Encode(usage.NewEvent(id, testProvider, testOffering, time.Date(2026, 12, 6, 7, 0, i%60, 0, time.UTC),
		usage.Usage{RequestID: "req_" + id, Ticket: "t", OfferingID: testOffering, Model: testModel, InputTokens: 3,
			OutputTokens: int64(i), EnergySource: usage.EnergyEstimated, Status: usage.StatusOK}))
	if err != nil {
		t.Fatal(err)
	}
	return id, raw
}

func ids(t *testing.T, o *outbox) []string {
	t.Helper()
	entries, err := o.list()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		body, err := o.read(e)
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := usage.Decode(body); err != nil || ev.ID != e.id {
			t.Fatalf("entry %s reads as %q (%v)", e.id, body, err)
		}
		out = append(out, e.id)
	}
	return out
}

// An outbox opened again after a crash (the process gone without closing anything) holds every event add
// returned for, except those acknowledged, and sends nothing twice that it knew was acknowledged.
func TestOutboxLogKeepsWhatAddReturnedForAcrossACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o, err := openOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		id, raw := logEvent(t, i)
		if err := o.add(id, raw); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	entries, _ := o.list()
	for _, e := range entries[:4] { // the stream acknowledged the first four
		if err := o.remove(e); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.pending.Load(); got != 6 {
		t.Fatalf("pending %d after four acknowledgements of ten, want 6", got)
	}
	o.unlock()                    // the process gone: the kernel releases its lock, and closes nothing else
	again, err := openOutbox(dir) // the first is never closed: as after a crash
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, again); !slices.Equal(got, want[4:]) || again.pending.Load() != 6 {
		t.Errorf("reopened, the outbox holds %v (pending %d), want %v", got, again.pending.Load(), want[4:])
	}
}

// A crash in the middle of a write leaves a record cut short, or bytes that fail their checksum, at the end of a
// segment: the outbox keeps the whole records before it, cuts the tail off, and writes after it again.
func TestOutboxLogCutsATornTail(t *testing.T) {
	t.Parallel()
	for _, tail := range []struct {
		name string
		cut  func(record []byte) []byte
	}{
		{"cut short", func(r []byte) []byte { return r[:len(r)/2] }},
		{"a head alone", func(r []byte) []byte { return r[:recordHead] }},
		{"a wrong checksum", func(r []byte) []byte { r = bytes.Clone(r); r[len(r)-1] ^= 0xff; return r }},
		{"zeros", func(r []byte) []byte { return make([]byte, len(r)) }},
	} {
		t.Run(tail.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o, err := openOutbox(dir)
			if err != nil {
				t.Fatal(err)
			}
			id1, raw1 := logEvent(t, 1)
			if err := o.add(id1, raw1); err != nil {
				t.Fatal(err)
			}
			id2, raw2 := logEvent(t, 2)
			payload, _ := eventPayload(id2, raw2)
			record := make([]byte, recordHead+len(payload))
			record[0] = kindEvent
			binary.BigEndian.PutUint32(record[1:5], uint32(len(payload)))
			binary.BigEndian.PutUint32(record[5:9], crc32.Checksum(payload, castagnoli))
			copy(record[recordHead:], payload)
			path := o.segmentPath(o.cur.n)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail.cut(record)); err != nil {
				t.Fatal(err)
			}
			f.Close()

			o.unlock() // a crash: the kernel releases the lock
			again, err := openOutbox(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(t, again); !slices.Equal(got, []string{id1}) {
				t.Fatalf("kept %v, want only %s", got, id1)
			}
			if fi, err := os.Stat(path); err != nil || fi.Size() != again.entries[0].offset+int64(len(raw1)) {
				t.Errorf("the torn segment is %d bytes (%v), want it cut after the whole record", fi.Size(), err)
			}
			id3, raw3 := logEvent(t, 3)
			if err := again.add(id3, raw3); err != nil {
				t.Fatal(err)
			}
			again.unlock()
			third, err := openOutbox(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(t, third); !slices.Equal(got, []string{id1, id3}) {
				t.Errorf("after writing past the cut: %v, want %s and %s", got, id1, id3)
			}
		})
	}
}

// Requests that end together share an fsync: 64 adds at once, each fsync held 5 ms, take far fewer fsyncs
// than adds, and every add returns only after an fsync that began after its record was written.
func TestOutboxLogSharesOneFsyncBetweenConcurrentAdds(t *testing.T) {
	t.Parallel()
	o, err := openOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	var written atomic.Uint64 // the records written when the last fsync began
	o.testHookSync = func() {
		syncs.Add(1)
		o.mu.Lock()
		written.Store(o.written)
		o.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	const n = 64
	var wg sync.WaitGroup
	var late atomic.Int64
	for i := range n {
		wg.Go(func() {
			id, raw := logEvent(t, i)
			if err := o.add(id, raw); err != nil {
				t.Error(err)
			}
			o.syncMu.Lock()
			if o.synced < 1 {
				late.Add(1)
			}
			o.syncMu.Unlock()
		})
	}
	wg.Wait()
	if late.Load() != 0 {
		t.Errorf("%d adds returned before any fsync", late.Load())
	}
	if o.synced != n || o.pending.Load() != n {
		t.Errorf("synced through %d, pending %d; want %d both", o.synced, o.pending.Load(), n)
	}
	if got := syncs.Load(); got >= n/2 {
		t.Errorf("%d fsyncs for %d concurrent adds, want them shared", got, n)
	}
	t.Logf("%d adds, %d fsyncs", n, syncs.Load())
}

// Segments roll over at their limit; one whose events are all acknowledged is deleted, and the events left
// are read back in the order they were kept.
func TestOutboxLogRollsOverAndDeletesAcknowledgedSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o, err := openOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	o.segLimit = 2048 // a few events a segment
	var want []string
	for i := range 40 {
		id, raw := logEvent(t, i)
		if err := o.add(id, raw); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	segments := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
		return len(m)
	}
	before := segments()
	if before < 5 {
		t.Fatalf("%d segments for 40 events of a 2 KiB limit, want several", before)
	}
	entries, _ := o.list()
	for _, e := range entries[:30] {
		if err := o.remove(e); err != nil {
			t.Fatal(err)
		}
	}
	after := segments()
	if after >= before {
		t.Errorf("%d segments after 30 of 40 events were acknowledged, %d before: want the acknowledged ones gone", after, before)
	}
	o.unlock()
	again, err := openOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, again); !slices.Equal(got, want[30:]) {
		t.Errorf("reopened: %v, want %v", got, want[30:])
	}
	for _, e := range mustList(t, again) {
		if err := again.remove(e); err != nil {
			t.Fatal(err)
		}
	}
	again.unlock()
	final, err := openOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if final.pending.Load() != 0 || segments() != 1 {
		t.Errorf("with everything acknowledged: %d pending, %d segments; want none and the one being written", final.pending.Load(), segments())
	}
}

func mustList(t *testing.T, o *outbox) []outboxEntry {
	t.Helper()
	e, err := o.list()
	if err != nil {
		t.Fatal(err)
	}
	return e
}
