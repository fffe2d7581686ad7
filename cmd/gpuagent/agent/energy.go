package agent

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"
)

const (
	// sampleEvery is how often nvidia-smi reports the GPUs' power draw.
	sampleEvery = 100 * time.Millisecond
	// sampleStale is how old the last power sample may be before the measurement counts as lost: ten
	// intervals, so one slow reading does not switch a request to an estimate.
	sampleStale = 10 * sampleEvery
	// samplerRestart is the pause before nvidia-smi is started again after it exited.
	samplerRestart = 10 * time.Second
)

// rigMeter divides the rig's energy among the requests it serves. It integrates, over time, the rig's power
// divided by the number of requests in flight: E(t) = ∫ P(τ) / c(τ) dτ over the moments when c > 0. A request's
// energy is E(end) − E(start), its share of the rig's energy while it ran; the shares of all requests add up to
// the rig's energy over its busy time. Idle time (c = 0) is billed to no one.
//
// It keeps two integrals at once: one of board power × GPU count (the estimate) and one of the power nvidia-smi
// last reported (the measurement, held constant between samples). A request gets the measured figure only when
// the sampler delivered fresh samples over its whole duration (the same unbroken run of samples at its start
// and at its end); otherwise the estimate.
type rigMeter struct {
	now    func() time.Time
	boardW float64 // board power × GPU count

	mu         sync.Mutex
	last       time.Time // when the integrals were last advanced
	inFlight   int
	estimated  float64 // ∫ boardW / c dt, joules
	measured   float64 // ∫ sampled power / c dt, joules, while samples are fresh
	sampleW    float64 // total power of the last complete sample
	sampledAt  time.Time
	fresh      bool   // samples are arriving
	freshSince uint64 // counts the runs of fresh samples, so that a gap inside a request is seen
}

// meterMark is the integrals at a request's start.
type meterMark struct {
	estimated, measured float64
	fresh               bool
	run                 uint64
}

func newRigMeter(boardW float64, now func() time.Time) *rigMeter {
	return &rigMeter{now: now, boardW: boardW, last: now()}
}

// advance brings the integrals up to now. A time before the last advance (read by a concurrent request a
// moment earlier) counts as that advance's. The caller holds mu.
func (m *rigMeter) advance(now time.Time) {
	if m.fresh && now.Sub(m.sampledAt) > sampleStale {
		// Up to the staleness limit the last sample stands; past it the measurement is lost.
		m.advanceTo(m.sampledAt.Add(sampleStale))
		m.fresh = false
	}
	m.advanceTo(now)
}

func (m *rigMeter) advanceTo(t time.Time) {
	dt := t.Sub(m.last).Seconds()
	if dt <= 0 {
		return
	}
	if m.inFlight > 0 {
		c := float64(m.inFlight)
		m.estimated += m.boardW * dt / c
		if m.fresh {
			m.measured += m.sampleW * dt / c
		}
	}
	m.last = t
}

// enter counts a request in at its start, now.
func (m *rigMeter) enter(now time.Time) meterMark {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(now)
	m.inFlight++
	return meterMark{estimated: m.estimated, measured: m.measured, fresh: m.fresh, run: m.freshSince}
}

// leave counts a request out at its end, now, and returns its energy and how it was obtained.
func (m *rigMeter) leave(start meterMark, now time.Time) (joules float64, source usage.EnergySource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(now)
	m.inFlight--
	if start.fresh && m.fresh && start.run == m.freshSince {
		return m.measured - start.measured, usage.EnergyMeasured
	}
	return m.estimated - start.estimated, usage.EnergyEstimated
}

// sample records the rig's total power draw.
func (m *rigMeter) sample(watts float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.advance(now)
	if !m.fresh {
		m.fresh = true
		m.freshSince++
	}
	m.sampleW, m.sampledAt = watts, now
}

// lost says the sampler stopped: requests running now get the estimate.
func (m *rigMeter) lost() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.now())
	m.fresh = false
}

// source is how a request starting and ending now would have its energy taken.
func (m *rigMeter) source() usage.EnergySource {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance(m.now())
	if m.fresh {
		return usage.EnergyMeasured
	}
	return usage.EnergyEstimated
}

func (m *rigMeter) inFlightNow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inFlight
}

// samplePower runs nvidia-smi in its loop mode until ctx ends, feeding the rig meter, and starts it again when
// it exits. One long-running process, rather than one every 100 ms: nvidia-smi takes tens of milliseconds to
// start, longer than the interval allows.
func (a *Agent) samplePower(ctx context.Context) {
	for {
		err := a.runSampler(ctx)
		a.meter.lost()
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("nvidia-smi stopped; energy is estimated until it runs again", "error", err, "retry_in", samplerRestart)
		select {
		case <-ctx.Done():
			return
		case <-time.After(samplerRestart):
		}
	}
}

// runSampler runs one nvidia-smi process. Each line it prints is one GPU's reading, "<index>, <watts>"; the
// rig's power is the sum of every GPU's latest reading, recorded once each GPU has reported in the round.
func (a *Agent) runSampler(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, a.cfg.NvidiaSMI,
		"--query-gpu=index,power.draw", "--format=csv,noheader,nounits",
		"-lms", strconv.Itoa(int(sampleEvery/time.Millisecond)))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	latest := map[string]float64{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		index, watts, err := parsePowerLine(sc.Text())
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return err
		}
		if _, seen := latest[index]; seen {
			// A GPU reports again: the previous round is complete.
			a.meter.sample(sum(latest))
			clear(latest)
		}
		latest[index] = watts
	}
	err = cmd.Wait()
	if err == nil {
		err = sc.Err()
	}
	return err
}

// parsePowerLine reads "<index>, <watts>". A GPU without a power sensor prints "[N/A]": the measurement would
// miss it, so it is an error.
func parsePowerLine(line string) (index string, watts float64, err error) {
	index, value, ok := strings.Cut(line, ",")
	if ok {
		watts, err = strconv.ParseFloat(strings.TrimSpace(value), 64)
	}
	if !ok || err != nil || watts < 0 {
		return "", 0, fmt.Errorf("nvidia-smi printed %.100q, want <index>, <watts>", line)
	}
	return strings.TrimSpace(index), watts, nil
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
