package downloads_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/downloads"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestShelfPublishesWhatTheDirectoryHolds: a binary in the directory is published with the SHA-256 of its bytes,
// a missing one is not published, a replaced one is hashed again, and SHA256SUMS verifies with sha256sum itself.
func TestShelfPublishesWhatTheDirectoryHolds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	amd64 := []byte("#!/bin/sh\necho amd64 agent\n")
	if err := os.WriteFile(filepath.Join(dir, "gpuagent-linux-amd64"), amd64, 0o755); err != nil {
		t.Fatal(err)
	}
	shelf := downloads.New(dir)

	b, err := shelf.Agent("amd64")
	if err != nil || b.SHA256 != sum(amd64) || b.Size != int64(len(amd64)) || b.Name != "gpuagent-linux-amd64" {
		t.Fatalf("amd64: %+v, %v; want its hash %s", b, err, sum(amd64))
	}
	if _, err := shelf.Agent("arm64"); !errors.Is(err, downloads.ErrNotPublished) {
		t.Errorf("arm64, which the directory does not hold: %v, want ErrNotPublished", err)
	}
	for _, name := range []string{"../gpuagent-linux-amd64", "linux-amd64/../../etc/passwd", ""} {
		if _, err := shelf.Agent(name); !errors.Is(err, downloads.ErrNotPublished) {
			t.Errorf("architecture %q: %v, want ErrNotPublished", name, err)
		}
	}

	// A new agent put in place while the platform runs.
	amd64v2 := []byte("#!/bin/sh\necho amd64 agent, version 2\n")
	if err := os.WriteFile(filepath.Join(dir, "gpuagent-linux-amd64"), amd64v2, 0o755); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "gpuagent-linux-amd64"), later, later); err != nil {
		t.Fatal(err)
	}
	f, b, err := shelf.Open("amd64")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b.SHA256 != sum(amd64v2) {
		t.Errorf("after the binary changed, its hash is %s, want %s", b.SHA256, sum(amd64v2))
	}

	arm64 := []byte("#!/bin/sh\necho arm64 agent\n")
	if err := os.WriteFile(filepath.Join(dir, "gpuagent-linux-arm64"), arm64, 0o755); err != nil {
		t.Fatal(err)
	}
	bins, err := shelf.Published()
	if err != nil || len(bins) != 2 || bins[0].Name != "gpuagent-linux-amd64" || bins[1].Name != "gpuagent-linux-arm64" {
		t.Fatalf("published: %+v, %v", bins, err)
	}
	if err := os.WriteFile(filepath.Join(dir, downloads.SumsName), []byte(downloads.Sums(bins)), 0o644); err != nil {
		t.Fatal(err)
	}
	check := exec.Command("sha256sum", "-c", downloads.SumsName)
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
}
