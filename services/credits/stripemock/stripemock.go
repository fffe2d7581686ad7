// Package stripemock runs stripe-mock, Stripe's official mock of its API, as a child process:
// the default payment backend of `make run` and the one tests talk to. The platform's code
// path is the one it takes with real Stripe; only the API's address differs.
package stripemock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Find locates the stripe-mock binary: bin (STRIPE_MOCK_BIN) when it is set, then the PATH, then
// goBinDirs (GoBinDirs: where `go install` puts it). The caller reads the environment.
func Find(bin string, goBinDirs []string) (string, error) {
	if bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("STRIPE_MOCK_BIN=%s: %w", bin, err)
		}
		return bin, nil
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p, nil
	}
	for _, dir := range goBinDirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "stripe-mock")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("stripe-mock is not installed: run `make stripe-mock`, which installs the pinned version, or set STRIPE_MOCK_BIN")
}

// GoBinDirs are the folders `go install` may have put stripe-mock in, from the values of GOBIN,
// GOPATH and HOME, in the order Find looks in them.
func GoBinDirs(gobin, gopath, home string) []string {
	return []string{gobin, filepath.Join(gopath, "bin"), filepath.Join(home, "go", "bin")}
}

// Process is a running stripe-mock.
type Process struct {
	URL string // the HTTP API, e.g. http://127.0.0.1:41234
	cmd *exec.Cmd
}

// Start runs stripe-mock on a port the system chooses and waits until it answers. The port is
// the one stripe-mock says it bound: a port picked here and handed to it could be taken by
// another listener before stripe-mock binds it, and the wait would then talk to that listener.
func Start(ctx context.Context, bin string, log *slog.Logger) (*Process, error) {
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stripemock: start %s: %w", bin, err)
	}
	p := &Process{cmd: cmd}
	bound := make(chan string, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), listeningHTTP); ok {
				select {
				case bound <- strings.TrimSpace(addr):
				default:
				}
			}
			if log != nil {
				log.Debug("stripe-mock", "line", sc.Text())
			}
		}
	}()
	deadline := time.NewTimer(startWithin)
	defer deadline.Stop()
	select {
	case addr := <-bound:
		p.URL = "http://" + addr
	case <-ended:
		p.Stop()
		return nil, fmt.Errorf("stripemock: %s exited before it listened", bin)
	case <-deadline.C:
		p.Stop()
		return nil, fmt.Errorf("stripemock: stripe-mock did not listen within %s", startWithin)
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/v1/balance", nil)
		req.Header.Set("Authorization", "Bearer sk_test_123")
		req.Close = true // no idle connection outlives the wait
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-deadline.C:
			p.Stop()
			return nil, fmt.Errorf("stripemock: stripe-mock did not answer within %s", startWithin)
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// listeningHTTP begins the line in which stripe-mock says where it listens for HTTP.
const listeningHTTP = "Listening for HTTP at address:"

// startWithin bounds stripe-mock's start: it reads its whole OpenAPI description first, which
// takes seconds on a busy machine.
const startWithin = time.Minute

// Stop ends the process and waits until it has exited.
func (p *Process) Stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}
