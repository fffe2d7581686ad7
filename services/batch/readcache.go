package batch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// readCache keeps whole copies of stored files on local disk, so the scheduler's reads of one
// line at a time by offset are reads of a local file, not requests to the store
// (docs/batches.md, "The read cache"). A file's content never changes under its id (ids are
// new for every file, and a file is written once), so a copy is never stale; a deleted file's
// copy is dropped here, and in other processes it is unreachable, since every way to a file
// passes its row, and a deleted file's row is not found.
//
// The cache holds at most max bytes, but always the file last opened: past the bound, the copies
// used longest ago are removed. A copy removed while it is open stays readable through the
// handles already open on it (the file system keeps it until they close).
type readCache struct {
	dir string
	max int64

	mu      sync.Mutex
	entries map[string]*cacheEntry
	fills   map[string]*cacheFill // downloads under way, so concurrent opens download once
	total   int64
	tick    uint64 // orders uses, for eviction
}

type cacheEntry struct {
	size int64
	used uint64
}

type cacheFill struct {
	done chan struct{}
	err  error
}

// newReadCache empties dir, so no copy outlives the process that made it and the bound holds
// from the start.
func newReadCache(dir string, max int64) (*readCache, error) {
	if dir == "" || max <= 0 {
		return nil, errors.New("the read cache needs a directory and a size bound")
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("batch read cache: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("batch read cache: %w", err)
	}
	return &readCache{dir: dir, max: max, entries: map[string]*cacheEntry{}, fills: map[string]*cacheFill{}}, nil
}

// open opens the cached copy of id, fetching it first (fetch writes the whole file) when there is
// none.
func (c *readCache) open(id string, fetch func(io.Writer) error) (*os.File, error) {
	p := filepath.Join(c.dir, id)
	for {
		c.mu.Lock()
		if e, ok := c.entries[id]; ok {
			c.tick++
			e.used = c.tick
			f, err := os.Open(p)
			if err == nil {
				c.mu.Unlock()
				return f, nil
			}
			c.drop(id)
			c.mu.Unlock()
			continue
		}
		if fl, ok := c.fills[id]; ok {
			c.mu.Unlock()
			<-fl.done
			if fl.err != nil {
				return nil, fl.err
			}
			continue
		}
		fl := &cacheFill{done: make(chan struct{})}
		c.fills[id] = fl
		c.mu.Unlock()

		size, err := c.download(p, fetch)
		c.mu.Lock()
		delete(c.fills, id)
		if err == nil {
			c.tick++
			c.entries[id] = &cacheEntry{size: size, used: c.tick}
			c.total += size
			c.evict(id)
		}
		fl.err = err
		close(fl.done)
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// download writes the file to a temporary name and renames it into place once whole.
func (c *readCache) download(p string, fetch func(io.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(c.dir, filepath.Base(p)+".*.part")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	if err := fetch(tmp); err != nil {
		tmp.Close()
		return 0, err
	}
	st, err := tmp.Stat()
	if err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	return st.Size(), os.Rename(tmp.Name(), p)
}

// evict removes the copies used longest ago, but never keep, until the cache is within its bound.
func (c *readCache) evict(keep string) {
	for c.total > c.max {
		var oldest string
		for id, e := range c.entries {
			if id != keep && (oldest == "" || e.used < c.entries[oldest].used) {
				oldest = id
			}
		}
		if oldest == "" {
			return
		}
		c.drop(oldest)
	}
}

// drop removes a copy; the caller holds mu.
func (c *readCache) drop(id string) {
	if e, ok := c.entries[id]; ok {
		c.total -= e.size
		delete(c.entries, id)
	}
	os.Remove(filepath.Join(c.dir, id))
}

// forget removes the copy of a deleted file.
func (c *readCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop(id)
}
