package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"
)

// outbox keeps every usage event on disk until the stream has acknowledged it; the package comment gives its
// format. A removal lost in a crash only means a re-send, which the stream and the meter drop as a duplicate.
type outbox struct {
	dir     string
	pending atomic.Int64
	// testHookAdd, when set, runs as add begins: a test holds the write there to see what the client has
	// received meanwhile.
	testHookAdd func(id string)
}

const (
	outboxExt = ".json"
	tmpPrefix = ".tmp-"
)

// openOutbox creates the directory if needed and recovers what a crash left: a temporary file that holds a
// whole event (the crash came after its write and before its rename) is fsynced and renamed to the name add
// would have given it, unless the event is kept under that name already; any other temporary file (partial,
// empty, or naming another event than it holds) is removed.
func openOutbox(dir string) (*outbox, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := &outbox{dir: dir}
	kept, err := o.list()
	if err != nil {
		return nil, err
	}
	keptIDs := make(map[string]bool, len(kept))
	for _, e := range kept {
		keptIDs[e.id] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, tmpPrefix) {
			if err := o.recover(name, keptIDs); err != nil {
				return nil, fmt.Errorf("outbox: recover %s: %w", name, err)
			}
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if kept, err = o.list(); err != nil {
		return nil, err
	}
	o.pending.Store(int64(len(kept)))
	return o, nil
}

// recover keeps or removes one temporary file that a crash left; kept holds the ids of the events kept under
// their final names.
func (o *outbox) recover(name string, kept map[string]bool) error {
	path := filepath.Join(o.dir, name)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(name, tmpPrefix)
	ev, err := usage.Decode(raw)
	if err != nil || ev.ID != id {
		return removeIfThere(path)
	}
	if kept[id] {
		return removeIfThere(path) // kept already: this is a copy
	}
	if err := syncFile(path); err != nil {
		return err
	}
	kept[id] = true
	return os.Rename(path, filepath.Join(o.dir, o.fileName(id, ev.Time)))
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// fileName is the name an event is kept under: its time orders it among the others.
func (o *outbox) fileName(id string, at time.Time) string {
	return fmt.Sprintf("%020d-%s%s", at.UnixNano(), id, outboxExt)
}

// add stores an event durably. at orders it among the others.
func (o *outbox) add(id string, body []byte, at time.Time) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("outbox: keep event %s: %w", id, err)
		}
	}()
	if o.testHookAdd != nil {
		o.testHookAdd(id)
	}
	tmp := filepath.Join(o.dir, tmpPrefix+id)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(o.dir, o.fileName(id, at)))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	o.pending.Add(1)
	return syncDir(o.dir)
}

// outboxEntry is one stored event.
type outboxEntry struct {
	name string
	id   string
}

// list returns the stored events, oldest first.
func (o *outbox) list() ([]outboxEntry, error) {
	entries, err := os.ReadDir(o.dir) // sorted by name, that is by time
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var out []outboxEntry
	for _, e := range entries {
		name := e.Name()
		stem, ok := strings.CutSuffix(name, outboxExt)
		if !ok || strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		_, id, ok := strings.Cut(stem, "-")
		if !ok || id == "" {
			continue
		}
		out = append(out, outboxEntry{name: name, id: id})
	}
	return out, nil
}

func (o *outbox) read(e outboxEntry) ([]byte, error) {
	return os.ReadFile(filepath.Join(o.dir, e.name))
}

// remove forgets an acknowledged event.
func (o *outbox) remove(e outboxEntry) error {
	err := os.Remove(filepath.Join(o.dir, e.name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("outbox: %w", err)
	}
	o.pending.Add(-1)
	return nil
}

func syncDir(dir string) error { return syncFile(dir) }

// syncFile fsyncs a file or a directory.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
