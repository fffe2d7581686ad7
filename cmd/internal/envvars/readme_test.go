package envvars

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../../.."

// readmeTable is one table of README.md's "Configuration" section: the readers its heading names in code spans
// (a binary under cmd/, or `go test` for the tests and benchmarks) and the variables its first column lists.
type readmeTable struct {
	heading string
	readers []string
	listed  map[string]bool
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// readmeTables parses the tables of the "## Configuration" section of the README at path, one per "###"
// heading. A table before the first heading, or a heading without a table, is an error of the README.
func readmeTables(t *testing.T, path string) []readmeTable {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tables []readmeTable
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Configuration"
		case !in:
		case strings.HasPrefix(line, "### "):
			tb := readmeTable{heading: line, listed: map[string]bool{}}
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				tb.readers = append(tb.readers, m[1])
			}
			tables = append(tables, tb)
		case strings.HasPrefix(line, "|"):
			first := firstCell(line)
			if strings.TrimSpace(first) == "variable" || strings.Trim(first, " -") == "" {
				continue
			}
			if len(tables) == 0 {
				t.Fatalf("README.md: a configuration table before the first ### heading: %s", line)
			}
			names := 0
			for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
				if varName.MatchString(m[1]) {
					tables[len(tables)-1].listed[m[1]] = true
					names++
				}
			}
			if names == 0 {
				t.Errorf("README.md: a row of %q names no variable in its first column: %s", tables[len(tables)-1].heading, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if len(tb.listed) == 0 || len(tb.readers) == 0 {
			t.Errorf("README.md: %q has no table, or names no reader in code spans", tb.heading)
		}
	}
	return tables
}

// firstCell is a table row's first cell, up to the first "|" not escaped.
func firstCell(row string) string {
	row = strings.TrimPrefix(row, "|")
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++
		case '|':
			return row[:i]
		}
	}
	return row
}

// TestReadmeConfigurationTables: every variable a binary's config.go reads is in README.md's table for that
// binary, and the table lists nothing that is not read; the same for the tests and benchmarks (the table whose
// heading names `go test`); no code but a binary's config.go, tests and their support reads the environment.
func TestReadmeConfigurationTables(t *testing.T) {
	reads, err := Scan(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if !reads.Binaries["gpumarket"]["GPUMARKET_PAYOUT_MINIMUM"] || !reads.Binaries["gpuagent"]["GPUAGENT_OFFERING_KEY"] ||
		!reads.Tests["GPUMARKET_TEST_DATABASE_URL"] {
		t.Fatalf("the scan missed variables it must find: %+v", reads)
	}
	covered := map[string]bool{}
	for _, tb := range readmeTables(t, filepath.Join(repoRoot, "README.md")) {
		want := map[string]bool{}
		for _, reader := range tb.readers {
			covered[reader] = true
			vars, ok := reads.Binaries[reader], true
			if reader == "go test" {
				vars = reads.Tests
			} else if vars == nil {
				_, err := os.Stat(filepath.Join(repoRoot, "cmd", reader, "config.go"))
				ok = err == nil
			}
			if !ok {
				t.Errorf("README.md: %q names %s, which is neither a binary with a cmd/%[2]s/config.go nor `go test`", tb.heading, reader)
			}
			for v := range vars {
				want[v] = true
			}
		}
		for _, v := range sorted(want) {
			if !tb.listed[v] {
				t.Errorf("README.md: %q does not list %s, which %s reads", tb.heading, v, strings.Join(tb.readers, " or "))
			}
		}
		for _, v := range sorted(tb.listed) {
			if !want[v] {
				t.Errorf("README.md: %q lists %s, which %s does not read", tb.heading, v, strings.Join(tb.readers, " or "))
			}
		}
	}
	for bin, vars := range reads.Binaries {
		if len(vars) > 0 && !covered[bin] {
			t.Errorf("README.md: no configuration table names `%s`, which reads %s", bin, strings.Join(sorted(vars), ", "))
		}
	}
	if len(reads.Tests) > 0 && !covered["go test"] {
		t.Errorf("README.md: no configuration table names `go test`, and the tests read %s", strings.Join(sorted(reads.Tests), ", "))
	}
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
