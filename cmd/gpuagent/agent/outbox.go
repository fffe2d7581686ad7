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
}

const (
	outboxExt = ".json"
	tmpPrefix = ".tmp-"
)

// openOutbox creates the directory if needed and recovers what a crash left: a temporary file that holds a
// whole event (the crash came between its fsync and its rename) is kept; a partial one is removed.
func openOutbox(dir string) (*outbox, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := &outbox{dir: dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			path := filepath.Join(dir, name)
			raw, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("outbox: %w", err)
			}
			if ev, err := usage.Decode(raw); err == nil && ev.ID == strings.TrimPrefix(name, tmpPrefix) {
				if err := o.add(ev.ID, raw, ev.Time); err != nil {
					return nil, err
				}
			}
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("outbox: %w", err)
			}
		case strings.HasSuffix(name, outboxExt):
			o.pending.Add(1)
		}
	}
	return o, nil
}

// add stores an event durably. at orders it among the others.
func (o *outbox) add(id string, body []byte, at time.Time) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("outbox: keep event %s: %w", id, err)
		}
	}()
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
		err = os.Rename(tmp, filepath.Join(o.dir, fmt.Sprintf("%020d-%s%s", at.UnixNano(), id, outboxExt)))
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

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
