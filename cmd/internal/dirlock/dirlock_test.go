package dirlock

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// holdEnv, set, makes the test binary a process that holds the directory it names and then waits to be killed.
const holdEnv = "DIRLOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		l, err := Take(dir, "lock")
		if err != nil {
			os.Stdout.WriteString("refused: " + err.Error() + "\n")
			os.Exit(1)
		}
		if err := l.Note("http://127.0.0.1:8080"); err != nil {
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// A directory another process holds is refused with that process's id and note; once the process is killed
// (SIGKILL: nothing of its own runs) the directory is free.
func TestADirectoryIsOneProcesssUntilItDies(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the holder said %q (%v)", line, err)
	}

	_, err = Take(dir, "lock")
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("took a directory another process holds: %v", err)
	}
	if held.PID != cmd.Process.Pid || held.Note != "http://127.0.0.1:8080" || held.Dir != dir {
		t.Errorf("refused with %+v, want process %d and its note", held, cmd.Process.Pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := Take(dir, "lock")
	if err != nil {
		t.Fatalf("the directory of a killed process: %v", err)
	}
	l.Release()
	l.Release()
}

// In one process too, a second Take is refused until the first is released.
func TestASecondTakeWaitsForTheRelease(t *testing.T) {
	dir := t.TempDir()
	first, err := Take(dir, "lock")
	if err != nil {
		t.Fatal(err)
	}
	var held *HeldError
	if _, err := Take(dir, "lock"); !errors.As(err, &held) || held.PID != os.Getpid() || held.Note != "" {
		t.Fatalf("second take: %v (%+v), want refused by this process", err, held)
	}
	first.Release()
	second, err := Take(dir, "lock")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	second.Release()
}
