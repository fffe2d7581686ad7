package batch

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// stageService is a Service with only a store: Stage touches no database.
func stageService(t *testing.T, maxBytes int64) (*Service, string) {
	t.Helper()
	dir := t.TempDir()
	store, err := NewLocalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return NewService(Config{Storage: store, MaxFileBytes: maxBytes, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}), dir
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	list, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// slowReader hands out its text a few bytes at a time, as a network body does.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 7)]) }

func TestStage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		maxBytes  int64
		wantLines int
		wantErr   string
	}{
		{"lines counted with a final newline", "{}\n{}\n{}\n", 0, 3, ""},
		{"and without", "{}\n{}\n{}", 0, 3, ""},
		{"50,000 lines are taken", strings.Repeat("{}\n", MaxFileLines), 0, MaxFileLines, ""},
		{"50,001 are refused", strings.Repeat("{}\n", MaxFileLines+1), 0, 0, "more than 50000 lines"},
		{"50,001 without a final newline too", strings.Repeat("{}\n", MaxFileLines) + "{}", 0, 0, "more than 50000 lines"},
		{"more bytes than the limit are refused", strings.Repeat("x", 101), 100, 0, "larger than 100 bytes"},
		{"the limit itself is taken", strings.Repeat("x", 100), 100, 1, ""},
		{"an empty file is refused", "", 0, 0, "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, dir := stageService(t, tc.maxBytes)
			st, err := svc.Stage("acct", "in.jsonl", slowReader{strings.NewReader(tc.body)})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if n := entries(t, dir); n != 0 {
					t.Fatalf("a refused upload left %d files behind", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.lines != tc.wantLines || st.bytes != int64(len(tc.body)) {
				t.Fatalf("staged %d lines, %d bytes; want %d, %d", st.lines, st.bytes, tc.wantLines, len(tc.body))
			}
			// Staged is not visible under its id until committed.
			if _, err := svc.store.Open(st.id); err == nil {
				t.Fatal("a staged upload can be opened before it is committed")
			}
			if err := st.up.Commit(); err != nil {
				t.Fatal(err)
			}
			f, err := svc.store.Open(st.id)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, _ := io.ReadAll(f)
			if string(got) != tc.body || entries(t, dir) != 1 {
				t.Fatalf("stored %d bytes in %d files", len(got), entries(t, dir))
			}
		})
	}
}
