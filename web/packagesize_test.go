package web_test

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing"
)

// maxPackageLines is the most lines a package under web/ may hold in its Go files, its tests and
// the generated *_templ.go files left out: a package that grows past it is split by the work it
// serves, as web/developer/keys was from web/developer.
const maxPackageLines = 2500

// TestNoWebPackageIsTooLarge counts each package under web/ as `wc -l` counts its files (every
// newline) and fails for any over maxPackageLines, naming it with its count.
func TestNoWebPackageIsTooLarge(t *testing.T) {
	t.Parallel()
	lines := map[string]int{}
	err := fs.WalkDir(os.DirFS("."), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_templ.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		lines[path.Join("web", path.Dir(p))] += bytes.Count(b, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines["web/gateway"] == 0 || lines["web/developer"] == 0 {
		t.Fatalf("counted no lines in web/gateway or web/developer (%v): the test must run in web/", lines)
	}
	pkgs := make([]string, 0, len(lines))
	for p := range lines {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if n := lines[p]; n > maxPackageLines {
			t.Errorf("package %s has %d lines of Go (tests and *_templ.go left out), over the %d a web package may have: "+
				"move a part of it that stands alone into a package of its own", p, n, maxPackageLines)
		}
	}
}
