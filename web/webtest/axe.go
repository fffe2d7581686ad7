package webtest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// AxeSource is axe-core's script, which a browser test injects into a page to check its
// accessibility. It comes from the npm registry, pinned in web/webtest/axe/package-lock.json and
// installed by `make test-deps` (npm ci); the test fails, saying so, when it is missing.
func AxeSource(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "axe", "node_modules", "axe-core", "axe.min.js")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("axe-core is not installed (%v): run `make test-deps`, or `npm ci --prefix web/webtest/axe`", err)
	}
	return string(src)
}
