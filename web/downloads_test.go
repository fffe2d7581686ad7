package web_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/web"
	webprovider "github.com/gpumarket/gpumarket/web/provider"
)

// downloadsServer is the platform's web server publishing the binaries in dir, and its URL.
func downloadsServer(t *testing.T, dir string) string {
	t.Helper()
	srv := httptest.NewServer(web.New(web.Config{Downloads: downloads.New(dir), Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestDownloadsPublishTheAgentAndItsChecksums: /downloads/ serves the agent's binary with its hash to anyone, as a
// download, revalidated on every use; SHA256SUMS checks it with sha256sum; a binary the server does not hold is a
// plain 404 that says so; nothing else (no listing, no other file) is reachable.
func TestDownloadsPublishTheAgentAndItsChecksums(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := []byte("\x7fELF pretend agent for amd64")
	if err := os.WriteFile(filepath.Join(dir, "gpuagent-linux-amd64"), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("not published"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := downloadsServer(t, dir)

	get := func(method, path string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}

	res, body := get(http.MethodGet, "/downloads/gpuagent-linux-amd64", nil)
	if res.StatusCode != http.StatusOK || body != string(agent) {
		t.Fatalf("the amd64 agent: %d, %q", res.StatusCode, body)
	}
	for header, want := range map[string]string{
		"Content-Type":        "application/octet-stream",
		"Content-Disposition": `attachment; filename="gpuagent-linux-amd64"`,
		"Cache-Control":       "no-cache",
		"Etag":                `"` + sha256Hex(agent) + `"`,
		"Content-Length":      fmt.Sprint(len(agent)),
	} {
		if got := res.Header.Get(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	if cookies := res.Header.Values("Set-Cookie"); len(cookies) > 0 {
		t.Errorf("the download sets cookies %q: a shared cache would not keep it", cookies)
	}
	if res, _ := get(http.MethodGet, "/downloads/gpuagent-linux-amd64", http.Header{"If-None-Match": {`"` + sha256Hex(agent) + `"`}}); res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidating the binary the client holds: %d, want 304", res.StatusCode)
	}
	if res, body := get(http.MethodHead, "/downloads/gpuagent-linux-amd64", nil); res.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %d with %d bytes", res.StatusCode, len(body))
	}

	res, body = get(http.MethodGet, "/downloads/gpuagent-linux-arm64", nil)
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, "gpuagent-linux-arm64 is not available for download on this server") {
		t.Errorf("the arm64 agent the server does not hold: %d, %q", res.StatusCode, body)
	}

	res, sums := get(http.MethodGet, "/downloads/SHA256SUMS", nil)
	if res.StatusCode != http.StatusOK || sums != sha256Hex(agent)+"  gpuagent-linux-amd64\n" ||
		res.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("SHA256SUMS: %d %s, %q", res.StatusCode, res.Header.Get("Content-Type"), sums)
	}
	check := exec.Command("sha256sum", "-c", "-")
	check.Dir, check.Stdin = dir, strings.NewReader(sums)
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "gpuagent-linux-amd64: OK") {
		t.Errorf("sha256sum -c on SHA256SUMS: %v\n%s", err, out)
	}

	if res, body := get(http.MethodGet, "/downloads/gpuagent@.service", nil); res.StatusCode != http.StatusOK ||
		!strings.Contains(body, "ExecStart=/usr/local/bin/gpuagent") {
		t.Errorf("the systemd unit: %d, %q", res.StatusCode, body)
	}

	// No listing, no other file of the directory, no way out of it.
	for _, path := range []string{"/downloads/", "/downloads", "/downloads/secret.txt", "/downloads/..%2fgo.mod",
		"/downloads/%2e%2e%2f%2e%2e%2fgo.mod", "/downloads/gpuagent-linux-amd64%2f..%2fsecret.txt"} {
		res, body := get(http.MethodGet, path, nil)
		if res.StatusCode != http.StatusNotFound || strings.Contains(body, "not published") || strings.Contains(body, "module ") {
			t.Errorf("GET %s: %d, %q", path, res.StatusCode, body)
		}
	}
	raw := rawGet(t, base, "/downloads/../downloads/secret.txt")
	if !strings.HasPrefix(raw, "HTTP/1.1 404") && !strings.HasPrefix(raw, "HTTP/1.1 301") || strings.Contains(raw, "not published") {
		t.Errorf("a path with .. in it: %q", raw)
	}
}

// rawGet sends the path exactly as given (a Go client would clean it), and returns the raw response.
func rawGet(t *testing.T, base, path string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
	out, _ := io.ReadAll(conn)
	return string(out)
}

// TestTheConnectCommandDownloadsVerifiesAndRunsTheAgent runs the Connect page's command as a provider pastes it
// into a plain shell: it downloads the real agent from /downloads/, checks its SHA-256, and runs it against the
// platform's NATS with the rig's own credential and an inference server listing the offering's model (the one
// change from the page's text is that server's address); the agent's preflight passes and it serves. With a
// server that lists another model, the command fails with the agent's message. And a download that is not the
// published file fails the command before anything is run.
func TestTheConnectCommandDownloadsVerifiesAndRunsTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent")
	}
	t.Parallel()
	dir := t.TempDir()
	name := downloads.AgentName(runtime.GOARCH)
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), "../cmd/gpuagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpuagent: %v\n%s", err, out)
	}
	binary, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	base := downloadsServer(t, dir)

	const provider, offering, model = "prov_connect", "off_connect", "qwen2.5-7b-instruct"
	password := "rig-password-for-the-test"
	nats, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(),
		Users: []*server.User{natsserver.RigUser(provider, offering, password)}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nats.Shutdown(); nats.WaitForShutdown() })

	o := catalog.Offering{ID: offering, ProviderAccountID: provider, Model: model, GPU: "rtx-4090", GPUCount: 2}
	cred := web.RigCredential{NATSURL: nats.ClientURL(), NATSUser: events.RigUsername(offering), NATSPassword: password,
		OfferingKey: strings.Repeat("ab", 32)}
	dl := webprovider.AgentDownload{Arch: runtime.GOARCH, URL: base + "/downloads/" + name, SHA256: sha256Hex(binary)}
	command := webprovider.AgentCommand(o, cred, dl)
	if strings.Contains(command, "-addr") {
		t.Errorf("the command gives the agent an address to listen on:\n%s", command)
	}
	const upstreamOnPage = "http://127.0.0.1:8000"
	if !strings.Contains(command, "-upstream "+upstreamOnPage+" ") || !strings.Contains(command, "-model "+model+" ") {
		t.Fatalf("the command does not forward to %s for %s:\n%s", upstreamOnPage, model, command)
	}

	t.Run("verified and started", func(t *testing.T) {
		upstream := modelsUpstream(t, model, "another-model")
		sh := startShell(t, strings.Replace(command, upstreamOnPage, upstream, 1))
		sh.waitFor(t, "preflight passed")
		out := sh.stop(t)
		if !strings.Contains(out, "gpuagent: OK") {
			t.Errorf("sha256sum did not check the download:\n%s", out)
		}
	})

	t.Run("the upstream lacks the model", func(t *testing.T) {
		upstream := modelsUpstream(t, "another-model")
		sh := startShell(t, strings.Replace(command, upstreamOnPage, upstream, 1))
		out, err := sh.wait(t)
		want := "upstream " + upstream + " does not list model " + model + " (it lists: another-model)"
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("the command ends with %v, saying:\n%s\nwant it to fail saying %q", err, out, want)
		}
	})

	t.Run("a download that is not the published file is never run", func(t *testing.T) {
		evil := t.TempDir()
		marker := filepath.Join(t.TempDir(), "ran")
		impostor := []byte("#!/bin/sh\ntouch " + marker + "\n")
		if err := os.WriteFile(filepath.Join(evil, name), impostor, 0o755); err != nil {
			t.Fatal(err)
		}
		tampered := webprovider.AgentCommand(o, cred, webprovider.AgentDownload{Arch: runtime.GOARCH,
			URL: downloadsServer(t, evil) + "/downloads/" + name, SHA256: dl.SHA256})
		sh := startShell(t, tampered)
		out, err := sh.wait(t)
		if err == nil || !strings.Contains(out, "FAILED") {
			t.Errorf("the command with a file of another hash ends with %v:\n%s", err, out)
		}
		if _, statErr := os.Stat(marker); statErr == nil {
			t.Error("the file that failed its check was run")
		}
	})
}

// modelsUpstream is an inference server's /v1/models listing the models, and its base URL.
func modelsUpstream(t *testing.T, models ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		var data []string
		for _, m := range models {
			data = append(data, fmt.Sprintf(`{"id":%q,"object":"model"}`, m))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(data, ","))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// shell is a command running under sh -c in an empty directory, with nothing of this process's environment but a
// PATH to the system's tools.
type shell struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	out     bytes.Buffer
	lines   chan string
	exited  chan error
	drained chan struct{} // closed once all the command printed is in out
}

func startShell(t *testing.T, command string) *shell {
	t.Helper()
	s := &shell{lines: make(chan string, 1024), exited: make(chan error, 1), drained: make(chan struct{})}
	s.cmd = exec.Command("sh", "-c", command)
	s.cmd.Dir = t.TempDir()
	s.cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + s.cmd.Dir}
	// Its own process group, so that stopping the shell stops the agent it started too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = w, w
	s.cmd.WaitDelay = 5 * time.Second
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.drained)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		err := s.cmd.Wait()
		w.Close()
		s.exited <- err
	}()
	t.Cleanup(func() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) })
	return s
}

func (s *shell) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitFor waits until the command prints a line holding want.
func (s *shell) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line := <-s.lines:
			if strings.Contains(line, want) {
				return
			}
		case err := <-s.exited:
			s.exited <- err
			if strings.Contains(s.output(), want) {
				return
			}
			t.Fatalf("the command ended (%v) before saying %q:\n%s", err, want, s.output())
		case <-deadline:
			t.Fatalf("the command has not said %q in 30 s:\n%s", want, s.output())
		}
	}
}

// wait waits for the command to end by itself.
func (s *shell) wait(t *testing.T) (string, error) {
	t.Helper()
	select {
	case err := <-s.exited:
		<-s.drained
		return s.output(), err
	case <-time.After(30 * time.Second):
		t.Fatalf("the command has not ended in 30 s:\n%s", s.output())
		return "", nil
	}
}

// stop ends the command as systemd stops the agent (SIGTERM) and returns what it printed.
func (s *shell) stop(t *testing.T) string {
	t.Helper()
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	<-s.drained
	return s.output()
}
