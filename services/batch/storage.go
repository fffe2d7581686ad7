package batch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Storage holds the bytes of batch files by id (docs/batches.md, "Files"): LocalDir, a directory
// of this process, or S3Store, a bucket any number of processes share. Create returns a writer whose content appears under
// the id only once Commit is called: a file that failed half-way through its upload is never seen.
type Storage interface {
	Create(id string) (Upload, error)
	Open(id string) (ReadAtCloser, error)
	Remove(id string) error
}

// Upload is a file being written.
type Upload interface {
	io.Writer
	// Commit makes the bytes written the file's content; Abort throws them away. After either,
	// the other does nothing.
	Commit() error
	Abort()
}

// ReadAtCloser reads a stored file, from the start or at an offset.
type ReadAtCloser interface {
	io.Reader
	io.ReaderAt
	io.Closer
}

// LocalDir stores files in a directory: each under its id, written to a temporary name beside it
// and renamed into place when committed, so a reader sees a whole file or none.
type LocalDir struct{ Dir string }

var _ Storage = LocalDir{}

// NewLocalDir makes the directory if it is missing.
func NewLocalDir(dir string) (LocalDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return LocalDir{}, fmt.Errorf("batch files directory: %w", err)
	}
	return LocalDir{Dir: dir}, nil
}

// checkID refuses an id that is not a plain name, so no id reaches outside the store's directory
// or prefix.
func checkID(id string) error {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return fmt.Errorf("file id %q is not a name", id)
	}
	return nil
}

func (d LocalDir) path(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return filepath.Join(d.Dir, id), nil
}

// Create starts writing the file id.
func (d LocalDir) Create(id string) (Upload, error) {
	final, err := d.path(id)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(d.Dir, id+".*.part")
	if err != nil {
		return nil, err
	}
	return &localUpload{f: f, final: final}, nil
}

// Open opens the file id.
func (d LocalDir) Open(id string) (ReadAtCloser, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Remove deletes the file id; a file already gone is no error.
func (d LocalDir) Remove(id string) error {
	p, err := d.path(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

type localUpload struct {
	f     *os.File
	final string
	done  bool
}

func (u *localUpload) Write(p []byte) (int, error) { return u.f.Write(p) }

func (u *localUpload) Commit() error {
	if u.done {
		return nil
	}
	u.done = true
	if err := u.f.Sync(); err != nil {
		u.f.Close()
		os.Remove(u.f.Name())
		return err
	}
	if err := u.f.Close(); err != nil {
		os.Remove(u.f.Name())
		return err
	}
	if err := os.Rename(u.f.Name(), u.final); err != nil {
		os.Remove(u.f.Name())
		return err
	}
	return nil
}

func (u *localUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.f.Close()
	os.Remove(u.f.Name())
}
