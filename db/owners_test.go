package db_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/db"
)

// tableRef finds the table a statement names after one of SQL's keywords that take one. The platform writes its
// SQL's keywords in capitals, and prose ("from accounts") in lower case: only the capitals count.
var tableRef = regexp.MustCompile(`\b(?:FROM|JOIN|INTO|UPDATE|TABLE|USING|TRUNCATE)\s+(?:ONLY\s+|IF\s+(?:NOT\s+)?EXISTS\s+)?"?([a-z_][a-z0-9_]*)`)

// tablesNamed returns, for each package of the module (its directory), the tables the SQL of its Go files names:
// after a keyword in a string literal, or as a pgx.Identifier's name (CopyFrom). Tests are left out: they may set
// up and inspect any table.
func tablesNamed(t *testing.T, root string, tables map[string]bool) map[string]map[string][]string {
	t.Helper()
	named := map[string]map[string][]string{} // package to table to the files that name it
	note := func(pkg, table, file string) {
		if !tables[table] {
			return
		}
		if named[pkg] == nil {
			named[pkg] = map[string][]string{}
		}
		if !slices.Contains(named[pkg][table], file) {
			named[pkg][table] = append(named[pkg][table], file)
		}
	}
	err := walkGoFiles(root, func(path string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				for _, m := range tableRef.FindAllStringSubmatch(s, -1) {
					note(pkg, m[1], filepath.Base(rel))
				}
			case *ast.CompositeLit:
				// pgx.Identifier{"usage_events"}: a table named to CopyFrom.
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Identifier" {
					for _, e := range n.Elts {
						if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if s, err := strconv.Unquote(lit.Value); err == nil {
								note(pkg, s, filepath.Base(rel))
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return named
}

// migratedTables are the tables the migrations create.
func migratedTables(t *testing.T) map[string]bool {
	t.Helper()
	create := regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)
	tables := map[string]bool{}
	err := fs.WalkDir(db.Migrations, "migrations", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.Migrations, path)
		if err != nil {
			return err
		}
		for _, m := range create.FindAllStringSubmatch(string(b), -1) {
			tables[strings.ToLower(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// TestEveryTableHasOneOwner: every table the migrations create has an owning package (db.Owners); no package's SQL
// names a table it does not own, but for the uses db.Borrowed lists; and each of those is still a use, so that
// the list only shrinks.
func TestEveryTableHasOneOwner(t *testing.T) {
	tables := migratedTables(t)
	if len(tables) < 40 {
		t.Fatalf("the migrations create %d tables: the pattern no longer finds them", len(tables))
	}
	for table := range tables {
		if _, ok := db.Owners[table]; !ok && !isTableOfAnother(table, tables) {
			t.Errorf("table %s has no owner in db.Owners", table)
		}
	}
	for table, owner := range db.Owners {
		if !tables[table] {
			t.Errorf("db.Owners names %s, which no migration creates", table)
		}
		if _, err := os.Stat(filepath.Join("..", owner)); err != nil {
			t.Errorf("db.Owners gives %s to %s, which is no package here", table, owner)
		}
	}

	named := tablesNamed(t, "..", tables)
	testOnly := testSupport(t, "..")
	if !testOnly["services/fixtures"] {
		t.Fatal("services/fixtures is not found to be test support: the import reader finds nothing")
	}
	for pkg := range testOnly {
		delete(named, pkg) // test support, as tests are
	}
	if len(named["services/catalog"]) == 0 || len(named["services/metering"]) == 0 {
		t.Fatalf("no SQL found in services/catalog or services/metering: the reader finds nothing (%d packages)", len(named))
	}
	var problems []string
	for pkg, uses := range named {
		for table, files := range uses {
			owner := db.Owners[table]
			if owner == "" {
				owner = db.Owners[parentOf(table, tables)]
			}
			if owner == pkg {
				continue
			}
			if _, ok := db.Borrowed[pkg][table]; ok {
				continue
			}
			sort.Strings(files)
			problems = append(problems, pkg+" names "+table+" (owned by "+owner+") in "+strings.Join(files, ", "))
		}
	}
	for pkg, uses := range db.Borrowed {
		for table := range uses {
			if _, ok := named[pkg][table]; !ok {
				problems = append(problems, "db.Borrowed lets "+pkg+" name "+table+", which it no longer does: remove the entry")
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// isTableOfAnother says whether table is a partition of another table of the migrations (usage_events_2026_12 of
// usage_events): the owner of the parent owns it.
func isTableOfAnother(table string, tables map[string]bool) bool {
	return parentOf(table, tables) != ""
}

func parentOf(table string, tables map[string]bool) string {
	for other := range tables {
		if other != table && strings.HasPrefix(table, other+"_") && db.Owners[other] != "" {
			if _, own := db.Owners[table]; !own {
				return other
			}
		}
	}
	return ""
}

// testSupport returns the packages only tests use: those that test files import and that no package but another of
// them imports outside tests (services/fixtures, a package's test helpers). Their SQL builds rows for tests and is
// read as tests are; a package the platform itself imports is not one of them.
func testSupport(t *testing.T, root string) map[string]bool {
	t.Helper()
	const module = "github.com/gpumarket/gpumarket/"
	byTests := map[string]bool{}
	importers := map[string]map[string]bool{} // package to the packages whose non-test files import it
	isMain := map[string]bool{}
	err := walkGoFiles(root, func(path string) error {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		test := strings.HasSuffix(path, "_test.go")
		if f.Name.Name == "main" && !test {
			isMain[pkg] = true
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dep, ok := strings.CutPrefix(p, module)
			if !ok {
				continue
			}
			if test {
				byTests[dep] = true
				continue
			}
			if importers[dep] == nil {
				importers[dep] = map[string]bool{}
			}
			importers[dep][pkg] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	only := map[string]bool{}
	for pkg := range byTests {
		only[pkg] = !isMain[pkg]
	}
	for changed := true; changed; {
		changed = false
		for pkg, ok := range only {
			if !ok {
				continue
			}
			for imp := range importers[pkg] {
				if !only[imp] {
					only[pkg], changed = false, true
					break
				}
			}
		}
	}
	for pkg, ok := range only {
		if !ok {
			delete(only, pkg)
		}
	}
	return only
}

// walkGoFiles calls fn with the path of every Go file of the module under root, tests included, leaving out hidden
// directories, node_modules and testdata.
func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}
