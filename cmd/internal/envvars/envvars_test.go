package envvars

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files, by path under a fresh root, and returns the root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, src := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A binary's config.go reads every variable it names to a call, directly, through a helper of its own or
// through a getenv passed in; tests and test support read what they pass os.Getenv and os.LookupEnv.
func TestScanFindsReadsThroughHelpers(t *testing.T) {
	root := writeTree(t, map[string]string{
		"cmd/tool/config.go": `package main
import "os"
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
func read(getenv func(string) string) (string, string, bool) {
	_, set := os.LookupEnv("TOOL_GC")
	return envOr("TOOL_ADDR", ":80"), getenv("TOOL_KEY"), set
}`,
		"cmd/tool/main.go":         "package main\nimport \"os\"\nfunc main() { read(os.Getenv) }",
		"cmd/tool/main_test.go":    "package main\nimport \"os\"\nvar _ = os.Getenv(\"TOOL_TEST_ONLY\")",
		"db/dbtest/dbtest.go":      "package dbtest\nimport \"os\"\nvar _ = os.Getenv(\"TEST_DB\")",
		"services/quiet/quiet.go":  "package quiet\nvar _ = \"NOT_A_READ\"",
		".data/skipped/skipped.go": "package skipped\nimport \"os\"\nvar _ = os.Getenv(\"HIDDEN\")",
	})
	reads, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sorted(reads.Binaries["tool"]), " "); got != "TOOL_ADDR TOOL_GC TOOL_KEY" {
		t.Errorf("tool reads %s, want TOOL_ADDR TOOL_GC TOOL_KEY", got)
	}
	if got := strings.Join(sorted(reads.Tests), " "); got != "TEST_DB TOOL_TEST_ONLY" {
		t.Errorf("tests read %s, want TEST_DB TOOL_TEST_ONLY", got)
	}
}

// A read outside a binary's config.go, or one there whose name the scan cannot see, is refused by file and line.
func TestScanRefusesReadsOutOfPlace(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"a service": {"services/pay/pay.go": "package pay\nimport \"os\"\nvar _ = os.Getenv(\"PAY_KEY\")"},
		"web":       {"web/web.go": "package web\nimport \"os\"\nfunc f() { os.LookupEnv(\"WEB_X\") }"},
		"a binary's other file": {"cmd/tool/config.go": "package main",
			"cmd/tool/main.go": "package main\nimport \"os\"\nvar _ = os.Getenv(\"TOOL_X\")"},
		"a name from a variable": {"cmd/tool/config.go": `package main
import "os"
func read() (out []string) {
	for _, v := range []string{"TOOL_A", "TOOL_B"} {
		out = append(out, os.Getenv(v))
	}
	return out
}`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Scan(writeTree(t, files))
			if err == nil || !strings.Contains(err.Error(), ".go:") {
				t.Errorf("Scan: %v, want the read refused by file and line", err)
			}
		})
	}
}
