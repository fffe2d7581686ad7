package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"
)

// TestOutboxOfTheEarlierFormatIsMovedIntoTheLog starts an agent on a directory holding what the earlier format,
// one file per event, leaves behind after crashes: events under their final names, a whole temporary file (the
// crash came between its write and its rename), a whole temporary copy of an event already kept (a copy restored
// from a backup), a partial one and an empty one (the crash came during the write). The agent must start, keep
// exactly the whole events once each, send each of them once, and leave none of the old files.
func TestOutboxOfTheEarlierFormatIsMovedIntoTheLog(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{noRun: true})
	dir := t.TempDir()
	at := time.Now().Add(-time.Minute)
	event := func(i int) (string, []byte) {
		id := fmt.Sprintf("evt_crash%02d", i)
		raw, err := usage.Encode(usage.NewEvent(id, testProvider, testOffering, at.Add(time.Duration(i)*time.Second),
			usage.Usage{RequestID: fmt.Sprintf("req_crash%02d", i), Ticket: "t", OfferingID: testOffering, Model: testModel,
				InputTokens: 3, OutputTokens: int64(i), EnergySource: usage.EnergyEstimated, Status: usage.StatusOK}))
		if err != nil {
			t.Fatal(err)
		}
		return id, raw
	}
	write := func(name string, raw []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := 1; i <= 3; i++ { // finished events
		id, raw := event(i)
		write(fmt.Sprintf("%020d-%s.json", at.Add(time.Duration(i)*time.Second).UnixNano(), id), raw)
		want = append(want, id)
	}
	_, copyOf2 := event(2)
	write(legacyTmpPrefix+"evt_crash02", copyOf2) // a whole copy of a kept event
	id4, whole := event(4)
	write(legacyTmpPrefix+id4, whole) // whole, never renamed
	want = append(want, id4)
	id5, partial := event(5)
	write(legacyTmpPrefix+id5, partial[:len(partial)/2])
	write(legacyTmpPrefix+"evt_crash06", nil)
	_, other := event(7)
	write(legacyTmpPrefix+"evt_crash08", other) // whole, but not the event its name says

	a := r.startAgent(t, dir, false)
	names := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	sent := r.waitEvents(t, len(want))
	waitFor(t, "the outbox to drain", func() bool { return a.Stats().Outbox == 0 })
	var got []string
	for _, ev := range sent {
		got = append(got, ev.event.ID)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the stream received %v, want each whole event once: %v", got, want)
	}
	if n := r.streamCount(t); n != len(want) {
		t.Errorf("the stream holds %d events, want %d", n, len(want))
	}
	if st := a.Stats(); st.Acked != int64(len(want)) {
		t.Errorf("the agent counted %d acknowledgements, want %d", st.Acked, len(want))
	}
	for _, name := range names() {
		if !strings.HasSuffix(name, segmentExt) && name != lockName {
			t.Errorf("the outbox still holds %s", name)
		}
	}
	if kept, err := keptInOutbox(dir); err != nil || len(kept) != 0 {
		t.Errorf("the log keeps %d events (%v) once all were acknowledged", len(kept), err)
	}
}

// TestOutboxRecoveryKeepsWholeTemporaryFilesOfTheEarlierFormat opens the outbox alone and reads what it kept.
func TestOutboxRecoveryKeepsWholeTemporaryFilesOfTheEarlierFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	at := time.Date(2025, 3, 4, 5, 6, 7, 8000, time.UTC)
	raw, err := usage.Encode(usage.NewEvent("evt_whole", testProvider, testOffering, at,
		usage.Usage{RequestID: "req_whole", Ticket: "t", OfferingID: testOffering, Model: testModel,
			EnergySource: usage.EnergyEstimated, Status: usage.StatusOK}))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{legacyTmpPrefix + "evt_whole": raw, legacyTmpPrefix + "evt_cut": raw[:10], legacyTmpPrefix + "evt_none": nil} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := openOutbox(dir)
	if err != nil {
		t.Fatalf("openOutbox: %v", err)
	}
	entries, err := o.list()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].id != "evt_whole" || o.pending.Load() != 1 {
		t.Fatalf("kept %+v (pending %d), want only evt_whole", entries, o.pending.Load())
	}
	if body, err := o.read(entries[0]); err != nil || string(body) != string(raw) {
		t.Errorf("kept %q (%v), want the event's bytes", body, err)
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), segmentExt) && f.Name() != lockName {
			t.Errorf("the directory still holds %s", f.Name())
		}
	}
	// Opened again, as the next start after another crash would: nothing changes.
	o.unlock()
	if o, err = openOutbox(dir); err != nil || o.pending.Load() != 1 {
		t.Errorf("opened again: %v, %d pending; want the one event", err, o.pending.Load())
	}
}

// TestAFullOutboxIsSentNoFasterThanThePlatformAllows: an outbox of 1,256 events left by an outage goes out at
// maxPublishRate, a window at once and then 1,000 a second, so that the rig stays under the platform's rate limit.
func TestAFullOutboxIsSentNoFasterThanThePlatformAllows(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{noRun: true})
	dir := t.TempDir()
	const n = publishWindow + maxPublishRate
	at := time.Now().Add(-time.Minute)
	for i := range n {
		id := fmt.Sprintf("evt_backlog%04d", i)
		raw, err := usage.Encode(usage.NewEvent(id, testProvider, testOffering, at, usage.Usage{RequestID: "req_" + id,
			Ticket: "t", OfferingID: testOffering, Model: testModel, EnergySource: usage.EnergyEstimated, Status: usage.StatusOK}))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d-%s.json", at.UnixNano()+int64(i), id)), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a := r.startAgent(t, dir, false)
	waitFor(t, "the outbox to drain", func() bool { return a.Stats().Outbox == 0 })
	took := time.Since(start)
	if took < 900*time.Millisecond {
		t.Errorf("%d events sent in %s: faster than %d a second after the first window", n, took, maxPublishRate)
	}
	if got := r.streamCount(t); got != n {
		t.Errorf("the stream holds %d events, want %d", got, n)
	}
	t.Logf("%d events sent in %s", n, took.Round(time.Millisecond))
}

// Two agents started on one outbox directory (the default ./gpuagent-outbox, from one working directory) would
// write the same segment files: the second is refused at start with the first's process id, and once the first
// has let go of it (Close, or its process ending) the next opens it.
func TestAnOutboxIsOneAgentsAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := openOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, raw := logEvent(t, 1)
	if err := first.add(id, raw); err != nil {
		t.Fatal(err)
	}
	_, err = openOutbox(dir)
	if err == nil {
		t.Fatal("a second outbox opened on a directory the first holds")
	}
	for _, want := range []string{"in use by another gpuagent", fmt.Sprintf("(process %d)", os.Getpid()), "GPUAGENT_OUTBOX"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := ids(t, first); !slices.Equal(got, []string{id}) {
		t.Errorf("after the refusal the first outbox holds %v, want %s", got, id)
	}
	first.unlock()
	next, err := openOutbox(dir)
	if err != nil {
		t.Fatalf("opened after the first let go: %v", err)
	}
	if got := ids(t, next); !slices.Equal(got, []string{id}) {
		t.Errorf("the next agent's outbox holds %v, want %s", got, id)
	}
}
