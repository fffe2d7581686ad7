//go:build benchharness

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// platformProcess is a `gpumarket serve` a benchmark starts beside itself: some of the platform's
// roles in a process of their own, on the benchmark's database and its embedded NATS, as a
// deployment runs a role apart (GPUMARKET_ROLES). Its log goes to a file, shown when it fails.
type platformProcess struct {
	name string
	addr string // where it serves: /v1 for the gateway role, /healthz and /readyz for any
	// metricsAddr serves its /metrics and its Go runtime profiles (/debug/pprof/).
	metricsAddr string
	logPath     string
	cmd         *exec.Cmd
	exited      chan struct{}
}

// startPlatformProcess starts `gpumarket serve` (this very binary) with the roles, on a free
// loopback port and a data directory of its own, with env added to an environment cleared of the
// platform's settings, and waits until its /readyz answers 200.
func startPlatformProcess(ctx context.Context, name, roles, dataDir string, env []string) (*platformProcess, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(dataDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	pp := &platformProcess{name: name, addr: addr, metricsAddr: metricsAddr, logPath: filepath.Join(dataDir, name+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(pp.logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	pp.cmd = exec.Command(bin, "serve")
	pp.cmd.Env = append(environWithout("GPUMARKET_", "DATABASE_URL=", "NATS_URL=", "STRIPE_"), env...)
	pp.cmd.Env = append(pp.cmd.Env, "GPUMARKET_ROLES="+roles, "GPUMARKET_ADDR="+addr, "GPUMARKET_DATA_DIR="+dir,
		"GPUMARKET_METRICS_ADDR="+metricsAddr)
	pp.cmd.Stdout, pp.cmd.Stderr = logFile, logFile
	// Never outlive the benchmark, however it ends.
	pp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pp.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s process: %w", name, err)
	}
	go func() { _ = pp.cmd.Wait(); close(pp.exited) }()
	if err := pp.waitReady(ctx); err != nil {
		pp.stop()
		return nil, fmt.Errorf("%w; its log ends:\n%s", err, pp.logTail(20))
	}
	return pp, nil
}

// waitReady polls /readyz until it answers 200, for up to a minute.
func (pp *platformProcess) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, pp.URL()+"/readyz", nil)
		if err != nil {
			return err
		}
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-pp.exited:
			return fmt.Errorf("the %s process exited before it was ready (%v)", pp.name, pp.cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s process was not ready within a minute", pp.name)
		}
	}
}

func (pp *platformProcess) URL() string { return "http://" + pp.addr }

// cpuProfile writes the process's CPU profile over the next d to path.
func (pp *platformProcess) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pp.metricsAddr, secs), nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the %s process's CPU profile: HTTP %d", pp.name, res.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop asks the process to stop, as a deployment does (SIGTERM: it finishes what it holds), and
// kills it after 30 seconds.
func (pp *platformProcess) stop() {
	select {
	case <-pp.exited:
		return
	default:
	}
	_ = pp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pp.exited:
	case <-time.After(30 * time.Second):
		benchProgress("the %s process did not stop within 30 s of SIGTERM; killing it", pp.name)
		_ = pp.cmd.Process.Kill()
		<-pp.exited
	}
}

// cpuTime is the CPU time the process has used so far, user and system, of all its threads (from
// /proc/<pid>/stat, in the kernel's ticks of 10 ms); 0 where /proc cannot say.
func (pp *platformProcess) cpuTime() time.Duration { return procCPUTime(pp.cmd.Process.Pid) }

func procCPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields count from after its end.
	i := strings.LastIndexByte(string(b), ')')
	fields := strings.Fields(string(b[i+1:]))
	if i < 0 || len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14 of the line
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * tick
}

// logTail is the last n lines of the process's log.
func (pp *platformProcess) logTail(n int) string {
	b, err := os.ReadFile(pp.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freeLoopbackAddr is a loopback address with a port no one listens on now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
