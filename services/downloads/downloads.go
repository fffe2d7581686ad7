// Package downloads owns what the platform publishes at /downloads/ for providers' rigs: gpuagent's binaries for
// Linux on each architecture in Arches, read from one directory the platform is configured with
// (GPUMARKET_DOWNLOADS_DIR), and their SHA-256.
//
// A binary's hash is computed once, when it is first asked for, and again only when the file changed (its size or
// modification time): the platform can be given a new agent without a restart. The hash given with a file is
// always the hash of the bytes served with it, since both come from the same open file. Only the names this package
// publishes are ever opened, so no request names a path.
package downloads

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Arches are the architectures gpuagent is published for, as GOARCH names them, in the order the Connect page
// offers them.
var Arches = []string{"amd64", "arm64"}

// SumsName is the published checksum file, in the form `sha256sum -c` reads.
const SumsName = "SHA256SUMS"

// ErrNotPublished is the error of a binary the directory does not hold.
var ErrNotPublished = errors.New("not published on this server")

// AgentName is the published name of gpuagent for Linux on arch: gpuagent-linux-amd64.
func AgentName(arch string) string { return "gpuagent-linux-" + arch }

// ArchOf is the architecture of a published agent's name; false for any other name.
func ArchOf(name string) (string, bool) {
	for _, arch := range Arches {
		if name == AgentName(arch) {
			return arch, true
		}
	}
	return "", false
}

// Binary is one published file as served now.
type Binary struct {
	Name    string // its published name, which is also its name in the directory
	Size    int64
	ModTime time.Time
	SHA256  string // hexadecimal
}

// Shelf is the directory of published binaries.
type Shelf struct {
	dir string

	mu     sync.Mutex
	hashed map[string]Binary // by name, as last hashed
}

// New is the shelf of the binaries in dir. The directory need not exist: then nothing is published.
func New(dir string) *Shelf {
	return &Shelf{dir: dir, hashed: map[string]Binary{}}
}

// Dir is the directory the shelf reads.
func (s *Shelf) Dir() string { return s.dir }

// Agent is gpuagent's binary for Linux on arch; an error wrapping ErrNotPublished when the directory has none.
func (s *Shelf) Agent(arch string) (Binary, error) {
	f, b, err := s.Open(arch)
	if err != nil {
		return Binary{}, err
	}
	f.Close()
	return b, nil
}

// Open opens gpuagent's binary for Linux on arch, to be served with b's hash, the hash of exactly these bytes;
// an error wrapping ErrNotPublished when the directory has none. The caller closes f.
func (s *Shelf) Open(arch string) (f *os.File, b Binary, err error) {
	name := AgentName(arch)
	if _, ok := ArchOf(name); !ok {
		return nil, Binary{}, fmt.Errorf("downloads: %s: %w", name, ErrNotPublished)
	}
	f, err = os.Open(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Binary{}, fmt.Errorf("downloads: %s: %w", name, ErrNotPublished)
	}
	if err != nil {
		return nil, Binary{}, fmt.Errorf("downloads: %w", err)
	}
	if b, err = s.hash(f, name); err != nil {
		f.Close()
		return nil, Binary{}, err
	}
	return f, b, nil
}

// hash is the open file's Binary: the one hashed before when the file is unchanged since, else hashed now.
func (s *Shelf) hash(f *os.File, name string) (Binary, error) {
	info, err := f.Stat()
	if err != nil {
		return Binary{}, fmt.Errorf("downloads: %w", err)
	}
	if !info.Mode().IsRegular() {
		return Binary{}, fmt.Errorf("downloads: %s: not a regular file: %w", name, ErrNotPublished)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.hashed[name]; ok && b.Size == info.Size() && b.ModTime.Equal(info.ModTime()) {
		return b, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Binary{}, fmt.Errorf("downloads: hash %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Binary{}, fmt.Errorf("downloads: %w", err)
	}
	b := Binary{Name: name, Size: info.Size(), ModTime: info.ModTime(), SHA256: hex.EncodeToString(h.Sum(nil))}
	s.hashed[name] = b
	return b, nil
}

// Published are the agent's binaries the directory holds now, in the order of Arches.
func (s *Shelf) Published() ([]Binary, error) {
	var out []Binary
	for _, arch := range Arches {
		b, err := s.Agent(arch)
		if errors.Is(err, ErrNotPublished) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Sums is SHA256SUMS for the published binaries: one "<hash>  <name>" line each, as sha256sum writes them.
func Sums(bins []Binary) string {
	var b strings.Builder
	for _, bin := range bins {
		b.WriteString(bin.SHA256 + "  " + bin.Name + "\n")
	}
	return b.String()
}
