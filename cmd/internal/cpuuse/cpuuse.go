// Package cpuuse samples where a benchmark's CPU time goes: this process, the PostgreSQL
// processes working for its database, and the whole machine.
package cpuuse

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sample is the CPU time spent so far by this process, by the PostgreSQL processes that
// work for the run, and by the whole machine, so that a run can say where its time went. On a
// system without Linux's /proc, only this process's own time is known.
type Sample struct {
	Self, Postgres, Busy, Total time.Duration
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on every Linux platform Go runs on).
const clockTick = 10 * time.Millisecond

// Take samples the CPU times. PostgreSQL's processes are counted when they work for the
// database named (its backends and autovacuum workers) or for the whole server (the WAL
// writer, the checkpointer and the background writer), not when they serve another database
// on the same server.
func Take(database string) Sample {
	s := Sample{Self: Self()}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		// cpu  user nice system idle iowait irq softirq steal ...
		line, _, _ := bytes.Cut(stat, []byte("\n"))
		for i, f := range strings.Fields(string(line))[1:] {
			n, _ := strconv.ParseInt(f, 10, 64)
			s.Total += time.Duration(n) * clockTick
			if i != 3 && i != 4 { // idle and iowait
				s.Busy += time.Duration(n) * clockTick
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		title := string(bytes.TrimRight(cmdline, "\x00 "))
		if err != nil || !strings.HasPrefix(title, "postgres: ") || !strings.Contains(title, " "+database+" ") &&
			!strings.HasSuffix(title, ": walwriter") && !strings.HasSuffix(title, ": checkpointer") &&
			!strings.HasSuffix(title, ": background writer") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		// After "pid (comm) ", utime and stime are the 12th and 13th fields.
		_, rest, _ := bytes.Cut(b, []byte(") "))
		if f := strings.Fields(string(rest)); len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			s.Postgres += time.Duration(u+k) * clockTick
		}
	}
	return s
}

// Self is the user and system CPU time this process has used.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Use is where CPU time went between two samples: Self is this process's.
type Use struct {
	Self, Postgres, Busy, Total time.Duration
}

// Since is the CPU time used between earlier and s.
func (s Sample) Since(earlier Sample) Use {
	return Use{Self: s.Self - earlier.Self, Postgres: s.Postgres - earlier.Postgres,
		Busy: s.Busy - earlier.Busy, Total: s.Total - earlier.Total}
}
