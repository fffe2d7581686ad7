// Package envvars finds, by parsing the repository's Go sources, the environment variables its code reads, and
// where. The rule it keeps: each binary reads its environment in one file, cmd/<binary>/config.go, and hands the
// values on as typed settings; packages under services/, web/ and db/ never read it, apart from the few that
// support tests (TestSupport), and tests read what they please. README.md's configuration tables and the
// deployment files are tested against what Scan finds, so a variable added to a config.go without a line in
// README.md, or a line left behind for a variable no longer read, fails the tests.
//
// It is test support: tests import it; no binary does.
package envvars

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// TestSupport are the packages, besides _test.go files, that read the environment for tests: the admin database
// tests create theirs through, the browser, stripe-mock.
var TestSupport = []string{"db/dbtest", "web/webtest", "services/credits/stripemock/stripemocktest"}

// Reads is what the sources read, by reader.
type Reads struct {
	// Binaries maps a binary's directory under cmd/ (gpumarket, gpuagent) to the variables its config.go reads.
	Binaries map[string]map[string]bool
	// Tests are the variables that _test.go files and the TestSupport packages read.
	Tests map[string]bool
}

// All is every variable read, by a binary or by tests.
func (r Reads) All() map[string]bool {
	all := map[string]bool{}
	for _, vars := range r.Binaries {
		for v := range vars {
			all[v] = true
		}
	}
	for v := range r.Tests {
		all[v] = true
	}
	return all
}

// varName is what a string literal that names an environment variable looks like.
var varName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)

// Scan parses every Go file under root, the module's root, and returns the variables read. A binary's config.go
// reads every variable named by a string literal passed to any call in it (os.Getenv, os.LookupEnv and the
// file's helpers, such as envOr or a getenv passed in), so that a read through a helper is found as well as a
// direct one; a direct read there with a name that is not a literal must take it from a parameter of the
// function it is in, a helper whose callers pass literals. Tests and TestSupport read the literals they pass
// to os.Getenv and os.LookupEnv. A read anywhere else is an error, which names the file and line.
func Scan(root string) (Reads, error) {
	r := Reads{Binaries: map[string]map[string]bool{}, Tests: map[string]bool{}}
	var misplaced []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		reads := directReads(f)
		switch {
		case strings.HasSuffix(rel, "_test.go") || isTestSupport(rel):
			for _, call := range reads {
				if name, ok := literal(call); ok {
					r.Tests[name] = true
				}
			}
		case isConfigFile(rel):
			bin := strings.Split(rel, "/")[1]
			if r.Binaries[bin] == nil {
				r.Binaries[bin] = map[string]bool{}
			}
			for name := range literalArgs(f) {
				r.Binaries[bin][name] = true
			}
			misplaced = append(misplaced, unnamedReads(fset, f)...)
		default:
			for _, call := range reads {
				misplaced = append(misplaced, fmt.Sprintf("%s: reads the environment outside its binary's config.go",
					fset.Position(call.Pos())))
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	if len(misplaced) > 0 {
		sort.Strings(misplaced)
		return r, fmt.Errorf("%d reads of the environment out of place:\n%s", len(misplaced), strings.Join(misplaced, "\n"))
	}
	return r, nil
}

// isConfigFile says whether rel is a binary's config.go: cmd/<binary>/config.go.
func isConfigFile(rel string) bool {
	parts := strings.Split(rel, "/")
	return len(parts) == 3 && parts[0] == "cmd" && parts[1] != "internal" && parts[2] == "config.go"
}

func isTestSupport(rel string) bool {
	for _, dir := range TestSupport {
		if filepath.ToSlash(filepath.Dir(rel)) == dir {
			return true
		}
	}
	return false
}

// isDirectRead says whether call reads a variable by itself: os.Getenv or os.LookupEnv, or a function named
// getenv that a binary's config.go is passed in place of os.Getenv.
func isDirectRead(call *ast.CallExpr) bool {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		pkg, ok := fn.X.(*ast.Ident)
		return ok && pkg.Name == "os" && (fn.Sel.Name == "Getenv" || fn.Sel.Name == "LookupEnv")
	case *ast.Ident:
		return fn.Name == "getenv"
	}
	return false
}

// directReads are the file's direct reads of a variable.
func directReads(f *ast.File) []*ast.CallExpr {
	var out []*ast.CallExpr
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && isDirectRead(call) {
			out = append(out, call)
		}
		return true
	})
	return out
}

// literal is the variable a direct read names with a string literal.
func literal(call *ast.CallExpr) (string, bool) {
	if len(call.Args) != 1 {
		return "", false
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// literalArgs are the string literals that look like a variable's name among the arguments of the file's calls.
func literalArgs(f *ast.File) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		for _, arg := range call.Args {
			lit, ok := arg.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && varName.MatchString(s) {
				names[s] = true
			}
		}
		return true
	})
	return names
}

// unnamedReads are the direct reads of a config.go that name their variable neither with a literal nor with a
// parameter of the function, or function literal, they are in.
func unnamedReads(fset *token.FileSet, f *ast.File) []string {
	var out []string
	var params []map[string]bool // of the enclosing functions, innermost last
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		var ft *ast.FuncType
		var body *ast.BlockStmt
		switch n := n.(type) {
		case *ast.FuncDecl:
			ft, body = n.Type, n.Body
		case *ast.FuncLit:
			ft, body = n.Type, n.Body
		case *ast.CallExpr:
			if !isDirectRead(n) {
				return true
			}
			if _, ok := literal(n); ok {
				return true
			}
			if len(n.Args) != 1 {
				return true
			}
			if id, ok := n.Args[0].(*ast.Ident); ok && len(params) > 0 && params[len(params)-1][id.Name] {
				return true
			}
			out = append(out, fmt.Sprintf("%s: reads a variable whose name is neither a literal nor a parameter of a helper",
				fset.Position(n.Pos())))
			return true
		default:
			return true
		}
		if body == nil {
			return false
		}
		names := map[string]bool{}
		for _, field := range ft.Params.List {
			for _, id := range field.Names {
				names[id.Name] = true
			}
		}
		params = append(params, names)
		ast.Inspect(body, visit)
		params = params[:len(params)-1]
		return false
	}
	ast.Inspect(f, visit)
	return out
}
