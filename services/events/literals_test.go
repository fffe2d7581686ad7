package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// subjectRoots are the first tokens of the rigs' subjects and the refused events', each with the fewest tokens a
// subject has below it: a literal that starts with one and a dot, and then reads as the rest of such a subject
// (or as a wildcard, or as nothing yet, to be concatenated), is one of the platform's subjects. The fewest tokens
// keep file names out: "usage.csv" is not a rig's subject.
var subjectRoots = map[string]int{UsagePrefix: 2, HeartbeatPrefix: 2, RigCallPrefix: 2, RigReplyPrefix: 2,
	rigInboxRoot: 2, RejectedPrefix: 1}

// fixedNames are the platform's names that are whole literals, distinctive enough that no other string is spelled
// so. The consumer "meter" and the queue group "rig" are names too, but plain words that other strings spell (a
// role, a log key), so they are left out.
var fixedNames = []string{UsageStream, RejectedStream, UsageConfigLockBucket, UsagePausedSubject, MeteredSubject,
	CeilingBenchConsumer, ObservedSubject, KeyChangesSubject, HeartbeatRequestSubject, rigInboxRoot, RigCallPrefix,
	RigReplyPrefix, RejectedPrefix, AuthCalloutSubject, ConnzPingSubject}

// serverNamespaces are the subject spaces of nats-server and nats.go themselves: the system account's requests, the
// JetStream API and the default reply inboxes.
var serverNamespaces = []string{"$SYS.", "$JS.", "_INBOX."}

// looksLikeSubject reports whether a Go string literal's value is one of the platform's NATS names, or a subject
// under one of its roots or in the server's own namespaces. Test files may spell the server's namespaces: they
// attack the rigs' permissions with the server's own subjects (the JetStream API, the default inbox), which the
// platform never names.
func looksLikeSubject(s string, testFile bool) bool {
	for _, name := range fixedNames {
		if s == name {
			return true
		}
	}
	for root, fewest := range subjectRoots {
		rest, ok := strings.CutPrefix(s, root+".")
		if !ok {
			continue
		}
		if rest == "" {
			return true // the start of a subject built by concatenation
		}
		tokens := strings.Split(rest, ".")
		for _, tok := range tokens {
			if !subjectToken(tok) {
				return false
			}
		}
		return len(tokens) >= fewest || tokens[0] == AnyID || tokens[0] == ">"
	}
	for _, ns := range serverNamespaces {
		if strings.HasPrefix(s, ns) {
			return !testFile
		}
	}
	return false
}

// subjectToken reports whether tok can be a token of a subject as the platform writes them: ids, wildcards.
func subjectToken(tok string) bool {
	if tok == "" {
		return false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') && !strings.ContainsRune("-_*>", rune(c)) {
			return false
		}
	}
	return true
}

func TestLooksLikeSubject(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"usage.p.o", "usage.prov-full.off-full", "usage.>", "usage.*.*", "usage.", "heartbeat.",
		"heartbeat.p.o", "heartbeat.>", "rigcall.p.o.call", "rigreply.p.o.g1.1", "_INBOX_RIG.p.o", "usage_rejected.schema",
		"USAGE", "USAGE_REJECTED", "USAGE_CONFIG_LOCK", "usage_paused", "metered.usage", "routing.observed",
		"api_keys.changed", "heartbeat_request", "rigcall", "meterbench_ceiling", "$SYS.REQ.USER.AUTH", "$JS.API.INFO",
		"_INBOX.>"} {
		if !looksLikeSubject(s, false) {
			t.Errorf("%q is not taken for a subject", s)
		}
	}
	for _, s := range []string{"usage", "heartbeat", "usage.csv", "/usage.csv", "usage.csv?from=x", "gpumarket.usage.v1",
		"routing.Start", "routing: heartbeat on an unexpected subject ignored", "no heartbeat since 14:02 UTC",
		"heartbeat.p o", "meter", "rig", "RIGS", "Usage", "usage_rejection_counts"} {
		if looksLikeSubject(s, false) {
			t.Errorf("%q is taken for a subject", s)
		}
	}
	if looksLikeSubject("$JS.API.STREAM.INFO.USAGE", true) || looksLikeSubject("_INBOX.>", true) {
		t.Error("a test file may not attack the permissions with the server's own subjects")
	}
	if !looksLikeSubject("usage.p.o", true) {
		t.Error("a test file may spell the platform's subjects")
	}
}

// No Go file outside this package spells one of the platform's subjects or names: each uses the constants and
// functions here, so that a subject is written once.
func TestNoSubjectLiteralsOutsideThisPackage(t *testing.T) {
	t.Parallel()
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			name := d.Name()
			if abs == self || path != repoRoot && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		testFile := strings.HasSuffix(path, "_test.go")
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && looksLikeSubject(s, testFile) {
				t.Errorf("%s: %s spells a NATS subject or name; use package events", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; want the whole module", files, repoRoot)
	}
}
