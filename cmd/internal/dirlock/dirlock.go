// Package dirlock holds a directory for one process at a time: an exclusive flock on a file in it, which the
// kernel releases when the process ends, however it ends. A second holder is refused at once, told the first's
// process id and what the first wrote beside it (Lock.Note).
package dirlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock is a held directory.
type Lock struct {
	f *os.File
}

// HeldError is the refusal of a directory another holder has.
type HeldError struct {
	Dir  string
	PID  int    // the holder's process id; 0 when its file does not say
	Note string // what the holder noted beside it (Lock.Note)
}

func (e *HeldError) Error() string {
	s := e.Dir + " is held by another process"
	if e.PID > 0 {
		s = e.Dir + " is held by process " + strconv.Itoa(e.PID)
	}
	return s
}

// Take holds dir by its file name (created when missing), and writes this process's id in it.
func Take(dir, name string) (*Lock, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		held := &HeldError{Dir: dir}
		content, _ := io.ReadAll(io.LimitReader(f, 4096))
		first, rest, _ := strings.Cut(string(content), "\n")
		held.PID, _ = strconv.Atoi(strings.TrimSpace(first))
		held.Note = strings.TrimSpace(rest)
		return nil, held
	}
	l := &Lock{f: f}
	if err := l.Note(""); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// Note writes note beside the holder's process id, for a refused process to read.
func (l *Lock) Note(note string) error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+note), 0)
	return err
}

// Release lets the directory go; a Lock released twice is released once.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}
