package agent

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpumarket/gpumarket/cmd/internal/dirlock"
	"github.com/gpumarket/gpumarket/services/usage"
)

// outbox keeps every usage event on disk until the stream has acknowledged it; the package comment gives its
// format. A removal lost in a crash only means a re-send, which the stream and the meter drop as a duplicate.
//
// Events are appended to a log of segment files and made durable by group commit: add returns once an fsync that
// began after its record was written has ended, and one fsync covers every record written before it began, so
// that requests ending together share one.
type outbox struct {
	dir     string
	lock    *dirlock.Lock // held while this outbox is open (lockDir)
	pending atomic.Int64
	// testHookAdd, when set, runs as add begins: a test holds the write there to see what the client has
	// received meanwhile.
	testHookAdd func(id string)
	// testHookSync, when set, runs before each fsync of a segment that add waits for.
	testHookSync func()

	mu       sync.Mutex
	cur      *segment
	segs     map[uint64]*segment // the segments holding events not acknowledged yet, and the current one
	entries  []outboxEntry       // the events not acknowledged yet, in the order they were kept
	written  uint64              // records written to the current segments, counted over the outbox's life
	broken   error               // the current segment failed an fsync: the next add starts a new one
	segLimit int64

	syncMu  sync.Mutex
	synced  uint64 // every record up to this count is durable
	syncing bool
	syncErr error // the last fsync's failure, for the adds that waited on it
	syncAt  uint64
	cond    *sync.Cond
}

// segment is one file of the log.
type segment struct {
	n    uint64
	f    *os.File
	size int64
	live int // events in it not acknowledged yet
}

// outboxEntry is one kept event: where its record's body is.
type outboxEntry struct {
	id     string
	seg    uint64
	offset int64 // of the event's bytes in the segment
	length int
}

const (
	segmentExt = ".log"
	// segmentLimit is the size past which the log starts a new segment; a segment is deleted once every event
	// in it is acknowledged and it is not the one being written.
	segmentLimit = 4 << 20
	// recordHead is a record's kind (1 byte), its payload's length and the payload's CRC-32C (4 bytes each).
	recordHead = 9
	// maxRecord bounds a record's payload: an event is a few hundred bytes (usage.Encode).
	maxRecord = 1 << 20

	kindEvent byte = 'E' // payload: the id's length (2 bytes), the id, the encoded event
	kindAck   byte = 'A' // payload: the id of an acknowledged event

	// The outbox's format before the log, which openOutbox still reads: one file per event.
	legacyExt       = ".json"
	legacyTmpPrefix = ".tmp-"

	// lockName is the file an open outbox holds a lock on, so that no two agents write one directory.
	lockName = "lock"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openOutbox creates the directory if needed and reads what an earlier run left: the events of its segments that
// no acknowledgement follows, in the order they were kept. A segment ends at its first record that is cut short or
// fails its checksum (a crash during a write that add had not returned from): the rest is cut off. Events kept
// one file per event by an earlier version are moved into the log. New events go to a new segment.
func openOutbox(dir string) (_ *outbox, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	o := &outbox{dir: dir, lock: lock, segs: map[uint64]*segment{}, segLimit: segmentLimit}
	o.cond = sync.NewCond(&o.syncMu)
	defer func() {
		if err != nil {
			o.unlock()
		}
	}()
	names, legacy, err := o.scanDir()
	if err != nil {
		return nil, err
	}
	acked := map[string]bool{}
	var last uint64
	for _, n := range names {
		last = n
		if err := o.recoverSegment(n, acked); err != nil {
			return nil, fmt.Errorf("outbox: segment %d: %w", n, err)
		}
	}
	o.entries = slices.DeleteFunc(o.entries, func(e outboxEntry) bool {
		if acked[e.id] {
			o.segs[e.seg].live--
			return true
		}
		return false
	})
	for n, s := range o.segs {
		if s.live == 0 {
			if err := o.dropSegment(n); err != nil {
				return nil, err
			}
		}
	}
	if err := o.startSegment(last + 1); err != nil {
		return nil, err
	}
	if err := o.importLegacy(legacy); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o.pending.Store(int64(len(o.entries)))
	return o, nil
}

// lockDir holds the directory (package dirlock) for this outbox. Two agents writing one outbox would each number
// their segments after the last one they read, write the same files, and send each other's events under the wrong
// rig's credentials: the second agent is refused at start instead.
func lockDir(dir string) (*dirlock.Lock, error) {
	l, err := dirlock.Take(dir, lockName)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		by := "another gpuagent"
		if held.PID > 0 {
			by += fmt.Sprintf(" (process %d)", held.PID)
		}
		return nil, fmt.Errorf("outbox %s is in use by %s: give each agent a directory of its own (-outbox, GPUAGENT_OUTBOX)", dir, by)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return l, nil
}

// unlock releases the directory; the outbox is not used after it.
func (o *outbox) unlock() { o.lock.Release() }

// scanDir lists the segments, by number, and the files of the earlier one-file-per-event format.
func (o *outbox) scanDir() (segs []uint64, legacy []string, err error) {
	entries, err := os.ReadDir(o.dir) // sorted by name
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if stem, ok := strings.CutSuffix(name, segmentExt); ok {
			if n, err := strconv.ParseUint(stem, 10, 64); err == nil {
				segs = append(segs, n)
			}
			continue
		}
		if strings.HasSuffix(name, legacyExt) || strings.HasPrefix(name, legacyTmpPrefix) {
			legacy = append(legacy, name)
		}
	}
	slices.Sort(segs)
	return segs, legacy, nil
}

func (o *outbox) segmentPath(n uint64) string {
	return filepath.Join(o.dir, fmt.Sprintf("%020d%s", n, segmentExt))
}

// recoverSegment reads a segment's records into the entries and acked, and cuts off a torn tail.
func (o *outbox) recoverSegment(n uint64, acked map[string]bool) error {
	f, err := os.OpenFile(o.segmentPath(n), os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	s := &segment{n: n, f: f}
	o.segs[n] = s
	r := bufio.NewReaderSize(f, 64<<10)
	var head [recordHead]byte
	var off int64
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			break // the end, or a record cut short
		}
		kind, size, sum := head[0], binary.BigEndian.Uint32(head[1:5]), binary.BigEndian.Uint32(head[5:9])
		if (kind != kindEvent && kind != kindAck) || size > maxRecord {
			break
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(r, payload); err != nil || crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		switch kind {
		case kindAck:
			acked[string(payload)] = true
		case kindEvent:
			if len(payload) < 2 {
				break
			}
			idLen := int(binary.BigEndian.Uint16(payload))
			if 2+idLen > len(payload) {
				break
			}
			o.entries = append(o.entries, outboxEntry{id: string(payload[2 : 2+idLen]), seg: n,
				offset: off + recordHead + 2 + int64(idLen), length: len(payload) - 2 - idLen})
			s.live++
		}
		off += recordHead + int64(size)
	}
	s.size = off
	if fi, err := f.Stat(); err == nil && fi.Size() > off {
		// A tail that add never returned from: no client learned that its request was over.
		if err := f.Truncate(off); err != nil {
			return err
		}
		return f.Sync()
	}
	return nil
}

// startSegment opens segment n as the one written to, and makes its name durable.
func (o *outbox) startSegment(n uint64) error {
	f, err := os.OpenFile(o.segmentPath(n), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := syncDir(o.dir); err != nil {
		f.Close()
		return fmt.Errorf("outbox: %w", err)
	}
	o.cur = &segment{n: n, f: f}
	o.segs[n] = o.cur
	return nil
}

// dropSegment closes and deletes a segment none of whose events waits any longer.
func (o *outbox) dropSegment(n uint64) error {
	s := o.segs[n]
	delete(o.segs, n)
	s.f.Close()
	if err := os.Remove(o.segmentPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// importLegacy moves the events an earlier version kept one file per event into the log, oldest first, and
// deletes their files once the log holds them durably. A temporary file holding the whole event its name says
// (a crash came between its write and its rename) is kept too, unless its event is kept under its final name;
// any other temporary file is deleted.
func (o *outbox) importLegacy(names []string) error {
	if len(names) == 0 {
		return nil
	}
	kept := map[string]bool{}
	var tmps []string
	for _, name := range names {
		if strings.HasPrefix(name, legacyTmpPrefix) {
			tmps = append(tmps, name)
			continue
		}
		stem := strings.TrimSuffix(name, legacyExt)
		_, id, ok := strings.Cut(stem, "-")
		raw, err := os.ReadFile(filepath.Join(o.dir, name))
		if err != nil {
			return err
		}
		if ev, err := usage.Decode(raw); ok && id != "" && err == nil && ev.ID == id {
			if err := o.keepLater(id, raw); err != nil {
				return err
			}
			kept[id] = true
		}
	}
	for _, name := range tmps {
		id := strings.TrimPrefix(name, legacyTmpPrefix)
		raw, err := os.ReadFile(filepath.Join(o.dir, name))
		if err != nil {
			return err
		}
		if ev, err := usage.Decode(raw); err == nil && ev.ID == id && !kept[id] {
			if err := o.keepLater(id, raw); err != nil {
				return err
			}
			kept[id] = true
		}
	}
	if err := o.cur.f.Sync(); err != nil { // one fsync for them all, before their files go
		return err
	}
	for _, name := range names {
		if err := os.Remove(filepath.Join(o.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return syncDir(o.dir)
}

// appendRecord writes one record to the current segment, starting a new one first when it is full or failed.
// The caller holds o.mu.
func (o *outbox) appendRecord(kind byte, payload []byte) (seg uint64, payloadAt int64, err error) {
	if o.broken != nil || o.cur.size >= o.segLimit {
		if err := o.rotate(); err != nil {
			return 0, 0, err
		}
	}
	buf := make([]byte, recordHead+len(payload))
	buf[0] = kind
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[5:9], crc32.Checksum(payload, castagnoli))
	copy(buf[recordHead:], payload)
	s := o.cur
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		o.broken = err
		return 0, 0, err
	}
	payloadAt = s.size + recordHead
	s.size += int64(len(buf))
	o.written++
	return s.n, payloadAt, nil
}

// rotate makes the current segment durable and starts the next. The caller holds o.mu.
func (o *outbox) rotate() error {
	old := o.cur
	if o.broken == nil {
		if err := old.f.Sync(); err != nil {
			o.broken = err
			return err
		}
	}
	// Every record written so far is durable, or lost with a segment that failed its fsync: the adds waiting
	// on those learn it from their fsync, not from this one.
	if err := o.startSegment(old.n + 1); err != nil {
		return err
	}
	if o.broken == nil {
		o.syncMu.Lock()
		o.synced = max(o.synced, o.written)
		o.cond.Broadcast()
		o.syncMu.Unlock()
	}
	o.broken = nil
	if old.live == 0 {
		return o.dropSegment(old.n)
	}
	return nil
}

// eventPayload is an event record's payload.
func eventPayload(id string, body []byte) ([]byte, error) {
	if len(id) > 0xffff || 2+len(id)+len(body) > maxRecord {
		return nil, errors.New("the event is too large")
	}
	payload := make([]byte, 2+len(id)+len(body))
	binary.BigEndian.PutUint16(payload, uint16(len(id)))
	copy(payload[2:], id)
	copy(payload[2+len(id):], body)
	return payload, nil
}

// keepLater appends an event for openOutbox, which fsyncs once after the last.
func (o *outbox) keepLater(id string, body []byte) error {
	payload, err := eventPayload(id, body)
	if err != nil {
		return err
	}
	seg, at, err := o.appendRecord(kindEvent, payload)
	if err != nil {
		return err
	}
	o.segs[seg].live++
	o.entries = append(o.entries, outboxEntry{id: id, seg: seg, offset: at + 2 + int64(len(id)), length: len(body)})
	return nil
}

// add stores an event durably: it returns once the event's record has been fsynced.
func (o *outbox) add(id string, body []byte) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("outbox: keep event %s: %w", id, err)
		}
	}()
	if o.testHookAdd != nil {
		o.testHookAdd(id)
	}
	payload, err := eventPayload(id, body)
	if err != nil {
		return err
	}
	o.mu.Lock()
	seg, at, err := o.appendRecord(kindEvent, payload)
	if err != nil {
		o.mu.Unlock()
		return err
	}
	s, mine := o.segs[seg], o.written
	s.live++ // counted at once, so that no rotation deletes the segment while the record waits for its fsync
	o.mu.Unlock()
	err = o.syncThrough(mine)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		if s.live--; s != o.cur && s.live == 0 {
			_ = o.dropSegment(s.n)
		}
		return err
	}
	o.entries = append(o.entries, outboxEntry{id: id, seg: seg, offset: at + 2 + int64(len(id)), length: len(body)})
	o.pending.Add(1)
	return nil
}

// syncThrough returns once the records up to the count n are durable: it fsyncs the current segment itself, or
// waits for the fsync under way and then, if that began before record n was written, for the next.
func (o *outbox) syncThrough(n uint64) error {
	o.syncMu.Lock()
	defer o.syncMu.Unlock()
	for o.synced < n {
		if o.syncing {
			started := o.syncAt
			o.cond.Wait()
			if o.synced < n && o.syncErr != nil && started >= n {
				return o.syncErr // the fsync that covered this record failed
			}
			continue
		}
		o.syncing = true
		o.mu.Lock()
		target, s := o.written, o.cur
		o.mu.Unlock()
		o.syncAt = target
		o.syncMu.Unlock()
		if o.testHookSync != nil {
			o.testHookSync()
		}
		err := s.f.Sync()
		o.syncMu.Lock()
		o.syncing = false
		o.syncErr = err
		if err == nil {
			o.synced = max(o.synced, target)
		}
		o.cond.Broadcast()
		if err != nil {
			o.mu.Lock()
			if o.cur == s {
				o.broken = err
			}
			o.mu.Unlock()
			if target >= n && o.synced < n { // a rotation may have made the record durable meanwhile
				return err
			}
		}
	}
	return nil
}

// list returns the events kept, oldest first.
func (o *outbox) list() ([]outboxEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.entries), nil
}

// read returns an event's bytes, exactly as add was given them.
func (o *outbox) read(e outboxEntry) ([]byte, error) {
	o.mu.Lock()
	s := o.segs[e.seg]
	o.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("outbox: event %s is not kept", e.id)
	}
	body := make([]byte, e.length)
	if _, err := s.f.ReadAt(body, e.offset); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return body, nil
}

// remove forgets an acknowledged event. The acknowledgement is written to the log without an fsync: lost in a
// crash, it only means a re-send. A segment none of whose events waits any longer is deleted.
func (o *outbox) remove(e outboxEntry) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	// The sender removes events in the order it listed them: the first entry, almost always.
	i := slices.IndexFunc(o.entries, func(x outboxEntry) bool { return x.seg == e.seg && x.offset == e.offset })
	switch {
	case i < 0:
		return nil
	case i == 0:
		o.entries = o.entries[1:]
	default:
		o.entries = slices.Delete(o.entries, i, i+1)
	}
	o.pending.Add(-1)
	s := o.segs[e.seg]
	s.live--
	if s != o.cur && s.live == 0 {
		return o.dropSegment(s.n)
	}
	if _, _, err := o.appendRecord(kindAck, []byte(e.id)); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
