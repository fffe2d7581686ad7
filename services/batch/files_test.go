package batch

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// stageService is a Service with only a store, the local directory or the S3 store: Stage
// touches no database. stored counts what the store holds, objects and incomplete uploads on S3.
func stageService(t *testing.T, onS3 bool, maxBytes int64) (svc *Service, stored func() int) {
	t.Helper()
	now := func() time.Time { return time.Unix(1_700_000_000, 0) }
	if onS3 {
		store, client := newTestS3Store(t)
		return NewService(Config{Storage: store, MaxFileBytes: maxBytes, Now: now}), func() int {
			objects, uploads := bucketState(t, client)
			return len(objects) + len(uploads)
		}
	}
	dir := t.TempDir()
	store, err := NewLocalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return NewService(Config{Storage: store, MaxFileBytes: maxBytes, Now: now}), func() int {
		list, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
}

// slowReader hands out its text a few bytes at a time, as a network body does.
type slowReader struct{ r io.Reader }

func (s slowReader) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 7)]) }

// stageCase is an upload and what Stage makes of it.
type stageCase struct {
	name      string
	body      string
	maxBytes  int64
	wantLines int
	wantErr   string
}

// TestStage runs each upload on both stores: its lines and bytes counted, a refused one leaving
// nothing behind, a staged one invisible until committed.
func TestStage(t *testing.T) {
	for _, tc := range []stageCase{
		{"lines counted with a final newline", "{}\n{}\n{}\n", 0, 3, ""},
		{"and without", "{}\n{}\n{}", 0, 3, ""},
		{"50,000 lines are taken", strings.Repeat("{}\n", MaxFileLines), 0, MaxFileLines, ""},
		{"50,001 are refused", strings.Repeat("{}\n", MaxFileLines+1), 0, 0, "more than 50000 lines"},
		{"50,001 without a final newline too", strings.Repeat("{}\n", MaxFileLines) + "{}", 0, 0, "more than 50000 lines"},
		{"more bytes than the limit are refused", strings.Repeat("x", 101), 100, 0, "larger than 100 bytes"},
		{"the limit itself is taken", strings.Repeat("x", 100), 100, 1, ""},
		{"an empty file is refused", "", 0, 0, "empty"},
	} {
		for _, onS3 := range []bool{false, true} {
			store := "local directory"
			if onS3 {
				store = "s3"
			}
			t.Run(tc.name+", "+store, func(t *testing.T) { testStage(t, onS3, tc) })
		}
	}
}

func testStage(t *testing.T, onS3 bool, tc stageCase) {
	svc, stored := stageService(t, onS3, tc.maxBytes)
	st, err := svc.Stage("acct", "in.jsonl", slowReader{strings.NewReader(tc.body)})
	if tc.wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("error %v, want %q", err, tc.wantErr)
		}
		if n := stored(); n != 0 {
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
	if string(got) != tc.body || stored() != 1 {
		t.Fatalf("stored %d bytes in %d files", len(got), stored())
	}
}

// A file name loses the characters that turn text around, so "x\u202Elnosj.exe" cannot pass for
// "xexe.jsonl"; a name made only of them is no name.
func TestStageStripsBidiFromTheFileName(t *testing.T) {
	svc, _ := stageService(t, false, 0)
	for name, want := range map[string]string{
		"x\u202Elnosj.exe":                          "xlnosj.exe",
		"\u202Aa\u202Bb\u202Cc\u202Dd\u202Ee.jsonl": "abcde.jsonl",
		"\u2066f\u2067g\u2068h\u2069.jsonl":         "fgh.jsonl",
		"\u200Emarked\u200F.jsonl":                  "marked.jsonl",
		"données ✓ שלום.jsonl":                      "données ✓ שלום.jsonl",
	} {
		st, err := svc.Stage("acct", name, strings.NewReader("{}\n"))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if st.filename != want {
			t.Errorf("%q staged as %q, want %q", name, st.filename, want)
		}
		st.Abort()
	}
	if _, err := svc.Stage("acct", "\u202E\u2066\u200F", strings.NewReader("{}\n")); err == nil || !strings.Contains(err.Error(), "Name the file") {
		t.Fatalf("a name of bidi characters alone: %v, want it refused", err)
	}
}
