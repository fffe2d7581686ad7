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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// Start runs stripe-mock on a free port and waits until it answers.
func Start(ctx context.Context, bin string, log *slog.Logger) (*Process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-http-port", strconv.Itoa(port), "-https-port", "-1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stripemock: start %s: %w", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if log != nil {
				log.Debug("stripe-mock", "line", sc.Text())
			}
		}
	}()
	p := &Process{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	deadline := time.Now().Add(20 * time.Second)
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
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop()
			return nil, errors.New("stripemock: stripe-mock did not answer within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
