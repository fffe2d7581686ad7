package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/gpumarket/gpumarket/cmd/internal/envvars"
)

// The systemd unit and the environment file that deploy/install-gpuagent.md installs on a provider's rig.
const (
	unitFile = "../../deploy/gpuagent@.service"
	envFile  = "../../deploy/gpuagent.env.example"
)

// TestSystemdUnitStartsTheAgentFromItsEnvironmentFile: deploy/gpuagent@.service, read as systemd reads it, starts
// gpuagent after the network is up, again whenever it stops, from the environment file the guide installs, with
// the outbox in the unit's state directory (kept across restarts and upgrades); the command line and the
// environment file, filled in with an offering's values, make a valid agent configuration, and the file names
// only variables the agent reads. The unit is a template: two instances, for two offerings on one machine, read
// environment files of their own and keep outboxes of their own.
func TestSystemdUnitStartsTheAgentFromItsEnvironmentFile(t *testing.T) {
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sections, err := unit.DeserializeSections(f)
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]map[string][]string{}
	for _, s := range sections {
		if opts[s.Section] == nil {
			opts[s.Section] = map[string][]string{}
		}
		for _, e := range s.Entries {
			opts[s.Section][e.Name] = append(opts[s.Section][e.Name], e.Value)
		}
	}
	one := func(section, name string) string {
		t.Helper()
		v := opts[section][name]
		if len(v) != 1 {
			t.Errorf("[%s] %s is set %d times, want once", section, name, len(v))
			return ""
		}
		return v[0]
	}
	for _, want := range []struct{ section, name, value string }{
		{"Unit", "After", "network-online.target"},
		{"Unit", "Wants", "network-online.target"},
		{"Service", "Type", "simple"},
		{"Service", "Restart", "always"},
		{"Service", "KillSignal", "SIGTERM"},
		{"Service", "StateDirectory", "gpuagent/%i"},
		{"Service", "EnvironmentFile", "/etc/gpuagent/%i.env"},
		{"Install", "WantedBy", "multi-user.target"},
	} {
		if got := one(want.section, want.name); got != want.value {
			t.Errorf("[%s] %s=%q, want %q", want.section, want.name, got, want.value)
		}
	}

	exec := strings.Fields(expandSpecifiers(t, one("Service", "ExecStart"), "off_1"))
	if len(exec) == 0 || exec[0] != "/usr/local/bin/gpuagent" {
		t.Fatalf("ExecStart %q does not run /usr/local/bin/gpuagent", exec)
	}

	// The environment file with an offering's values, as the provider fills it in.
	env := readEnvFile(t)
	known := agentEnvNames(t)
	for name := range env {
		if !known[name] {
			t.Errorf("%s sets %s, which gpuagent does not read", filepath.Base(envFile), name)
		}
	}
	for _, secret := range []string{"GPUAGENT_OFFERING_KEY", "GPUAGENT_NATS_PASSWORD"} {
		if _, ok := env[secret]; !ok {
			t.Errorf("%s has no %s: secrets come only from the environment", filepath.Base(envFile), secret)
		}
	}
	filled := map[string]string{
		"GPUAGENT_PROVIDER_ID": "prov_1", "GPUAGENT_OFFERING_ID": "off_1", "GPUAGENT_OFFERING_KEY": strings.Repeat("ab", 32),
		"NATS_URL": "nats://nats-1.example.com:4222,nats://nats-2.example.com:4222", "GPUAGENT_NATS_USER": "rig-off_1",
		"GPUAGENT_NATS_PASSWORD": "rig-password",
	}
	for k, v := range filled {
		if _, ok := env[k]; !ok {
			t.Errorf("%s has no %s to fill in", filepath.Base(envFile), k)
		}
		env[k] = v
	}
	cfg, err := parseConfig(exec[1:], func(name string) string { return env[name] }, io.Discard)
	if err != nil {
		t.Fatalf("gpuagent %q with the environment file: %v", exec[1:], err)
	}
	if state := "/var/lib/" + expandSpecifiers(t, one("Service", "StateDirectory"), "off_1") + "/"; !strings.HasPrefix(cfg.OutboxDir, state) {
		t.Errorf("the outbox is %q, not under the unit's state directory %s: it would not survive a restart", cfg.OutboxDir, state)
	}
	// Another offering's instance on the same machine: its own environment file, state directory and outbox.
	other := strings.Fields(expandSpecifiers(t, one("Service", "ExecStart"), "off_2"))
	otherCfg, err := parseConfig(other[1:], func(name string) string { return env[name] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ what, a, b string }{
		{"outbox", cfg.OutboxDir, otherCfg.OutboxDir},
		{"environment file", expandSpecifiers(t, one("Service", "EnvironmentFile"), "off_1"), expandSpecifiers(t, one("Service", "EnvironmentFile"), "off_2")},
		{"state directory", expandSpecifiers(t, one("Service", "StateDirectory"), "off_1"), expandSpecifiers(t, one("Service", "StateDirectory"), "off_2")},
	} {
		if v.a == v.b {
			t.Errorf("two instances of the unit share one %s, %s", v.what, v.a)
		}
	}
	if cfg.ProviderID != "prov_1" || cfg.OfferingID != "off_1" || len(cfg.OfferingKey) != 32 || cfg.NATSUser != "rig-off_1" ||
		cfg.NATSPassword != "rig-password" || cfg.NATSURL != filled["NATS_URL"] {
		t.Errorf("the agent's configuration %+v is not the environment file's", cfg)
	}
	if cfg.GPUSKU != "rtx-4090" || cfg.GPUCount != 1 || cfg.Capacity != 8 ||
		cfg.Upstream != "http://127.0.0.1:8000" {
		t.Errorf("the rig is %s x%d serving %d at once in front of %s", cfg.GPUSKU, cfg.GPUCount, cfg.Capacity,
			cfg.Upstream)
	}
}

// readEnvFile reads the example environment file as systemd does: KEY=VALUE lines, # comments.
func readEnvFile(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(envFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			t.Fatalf("%s:%d: %q is not KEY=VALUE", filepath.Base(envFile), n, line)
		}
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// agentEnvNames is the environment variables gpuagent reads, as the scan of its config.go finds them.
func agentEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	reads, err := envvars.Scan("../..")
	if err != nil {
		t.Fatal(err)
	}
	return reads.Binaries["gpuagent"]
}

// expandSpecifiers replaces the systemd specifiers the unit uses, as systemd does for a system unit's instance: %i
// the instance (the offering id), %S the state directories' root, %% a percent sign. Any other is an error: the test
// would not know what systemd makes of it.
func expandSpecifiers(t *testing.T, s, instance string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			t.Fatalf("%q ends in a lone %%", s)
		}
		i++
		switch s[i] {
		case 'i':
			b.WriteString(instance)
		case 'S':
			b.WriteString("/var/lib")
		case '%':
			b.WriteByte('%')
		default:
			t.Fatalf("%q uses the specifier %%%c, which this test does not expand", s, s[i])
		}
	}
	return b.String()
}

// TestSystemdAcceptsTheUnit: systemd's own check of unit files (systemd-analyze verify) reads an instance of
// deploy/gpuagent@.service, for an offering, without a word: no unknown key, no bad value, no specifier it cannot
// expand. The agent's path is an executable that exists here (the check wants one). Where systemd-analyze is not
// installed, the test says so and skips.
func TestSystemdAcceptsTheUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed here (apt-get install systemd): the unit is checked by go-systemd's parser only")
	}
	text, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "ExecStart=/usr/local/bin/gpuagent ") {
		t.Fatal("the unit does not run /usr/local/bin/gpuagent")
	}
	instance := filepath.Join(t.TempDir(), "gpuagent@3f2c9a1e-5b7d-4e21-9c0a-7d1e2f3a4b5c.service")
	if err := os.WriteFile(instance, []byte(strings.ReplaceAll(string(text), "/usr/local/bin/gpuagent ", self+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", instance).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
