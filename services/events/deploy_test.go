package events

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"sigs.k8s.io/yaml"
)

// The cluster's configuration spells the subjects the two accounts share in its own language, in
// deploy/nats/nats.conf and again in the NATS chart's values (deploy/k8s/nats-values.yaml): each must share exactly
// SharedWithRigs between exactly the accounts named here, so that the files and the code cannot drift apart.
func TestDeployConfigsShareWhatThePackageShares(t *testing.T) {
	want := sharedDeclarations(SharedWithRigs())

	confPath := filepath.Join(repoRoot, "deploy", "nats", "nats.conf")
	b, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`\$([A-Z_]+)`).FindAllStringSubmatch(string(b), -1) {
		t.Setenv(m[1], "v"+strings.ToLower(m[1])) // every variable the file reads needs a value to parse
	}
	natsConf, err := conf.ParseFile(confPath)
	if err != nil {
		t.Fatalf("%s: %v", confPath, err)
	}

	valuesPath := filepath.Join(repoRoot, "deploy", "k8s", "nats-values.yaml")
	if b, err = os.ReadFile(valuesPath); err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config struct {
			Merge map[string]any `json:"merge"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatalf("%s: %v", valuesPath, err)
	}

	for path, cfg := range map[string]map[string]any{confPath: natsConf, valuesPath: values.Config.Merge} {
		got := accountDeclarations(t, path, cfg)
		if !slices.Equal(got, want) {
			t.Errorf("%s shares between the accounts:\n  %s\nwant events.SharedWithRigs:\n  %s", path,
				strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if got := cfg["system_account"]; got != SystemAccount {
			t.Errorf("%s: system_account %v, want %s", path, got, SystemAccount)
		}
		callout, _ := dig(cfg, "authorization", "auth_callout").(map[string]any)
		if callout["account"] != PlatformAccount {
			t.Errorf("%s: the auth callout is in account %v, want %s, where AuthCalloutSubject is answered", path,
				callout["account"], PlatformAccount)
		}
	}
}

// sharedDeclarations is what the configuration must declare for the shared subjects: for each, the exporting
// account's export and the importing account's import, one line each, sorted.
func sharedDeclarations(shared []SharedSubject) []string {
	var lines []string
	for _, s := range shared {
		from, to, kind := PlatformAccount, RigsAccount, "stream"
		if s.FromRigs {
			from, to = RigsAccount, PlatformAccount
		}
		if s.Service {
			kind = "service"
		}
		lines = append(lines, from+" exports "+kind+" "+s.Subject+" to "+to, to+" imports "+kind+" "+s.Subject+" from "+from)
	}
	slices.Sort(lines)
	return lines
}

// accountDeclarations is every export and import of a parsed NATS configuration's accounts, in sharedDeclarations'
// form, sorted. An entry it cannot read fails the test.
func accountDeclarations(t *testing.T, path string, cfg map[string]any) []string {
	t.Helper()
	accounts, ok := cfg["accounts"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no accounts", path)
	}
	var lines []string
	for name, a := range accounts {
		account, _ := a.(map[string]any)
		for _, e := range list(account["exports"]) {
			export, _ := e.(map[string]any)
			kind, v := kindOf(export)
			subject := str(v)
			to := list(export["accounts"])
			if subject == "" || len(to) != 1 {
				t.Errorf("%s: account %s: an export that names no subject or not one account: %v", path, name, e)
				continue
			}
			lines = append(lines, name+" exports "+kind+" "+subject+" to "+str(to[0]))
		}
		for _, i := range list(account["imports"]) {
			imp, _ := i.(map[string]any)
			kind, v := kindOf(imp)
			src, _ := v.(map[string]any)
			if src == nil || str(src["subject"]) == "" || str(src["account"]) == "" {
				t.Errorf("%s: account %s: an import that names no subject or account: %v", path, name, i)
				continue
			}
			lines = append(lines, name+" imports "+kind+" "+str(src["subject"])+" from "+str(src["account"]))
		}
	}
	slices.Sort(lines)
	return lines
}

// kindOf is whether an export or import is a service or a stream, and its value under that key.
func kindOf(m map[string]any) (string, any) {
	for _, kind := range []string{"service", "stream"} {
		if v, ok := m[kind]; ok {
			return kind, v
		}
	}
	return "", nil
}

// list is a configuration's list, as either parser gives it.
func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// str is a configuration's string, as either parser gives it.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// dig is the value at a path of keys in a parsed configuration, or nil.
func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
