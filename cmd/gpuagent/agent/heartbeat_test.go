package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
)

// TestHeartbeatOnRequest: a rig on the embedded server, logged in with its own credential, answers a gateway's
// heartbeat request at once instead of at its next beat an hour away, and answers a burst of requests with at
// most one heartbeat per quarter second, the last one after the last request.
func TestHeartbeatOnRequest(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{heartbeat: time.Hour})
	beats := r.subscribe(t, events.HeartbeatSubject(testProvider, testOffering))
	// The agent beats at start and when it connects, which may come before this subscription: ask until it answers,
	// which also says it has subscribed to the requests.
	for deadline := time.Now().Add(5 * time.Second); ; {
		if err := r.nc.Publish(events.HeartbeatRequestSubject, nil); err != nil {
			t.Fatal(err)
		}
		msg, err := beats.NextMsg(100 * time.Millisecond)
		if err == nil {
			var hb Heartbeat
			if err := json.Unmarshal(msg.Data, &hb); err != nil || hb.OfferingID != testOffering || hb.Capacity != 8 {
				t.Fatalf("heartbeat %s (%v)", msg.Data, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat, asked for one for 5 s")
		}
	}
	for { // what the requests above still bring
		if _, err := beats.NextMsg(400 * time.Millisecond); err != nil {
			break
		}
	}
	if _, err := beats.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatal("a heartbeat came unasked, with an interval of an hour")
	}

	asked := time.Now()
	if err := r.nc.Publish(events.HeartbeatRequestSubject, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := beats.NextMsg(2 * time.Second); err != nil {
		t.Fatalf("no heartbeat on request: %v", err)
	}
	if took := time.Since(asked); took > 500*time.Millisecond {
		t.Errorf("the heartbeat came %s after the request, want at once", took)
	}

	// A hundred requests over a second, as a crowd of gateways starting together might send.
	start := time.Now()
	for range 100 {
		if err := r.nc.Publish(events.HeartbeatRequestSubject, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	lastAsked := time.Now()
	var got []time.Time
	for {
		msg, err := beats.NextMsg(600 * time.Millisecond)
		if err != nil {
			break
		}
		var hb Heartbeat
		if err := json.Unmarshal(msg.Data, &hb); err != nil {
			t.Fatal(err)
		}
		got = append(got, hb.At) // when the agent sent it: the test reads them only after the burst
	}
	span := lastAsked.Sub(start)
	most := int(span/events.HeartbeatRequestGap) + 2
	if len(got) == 0 || len(got) > most {
		t.Fatalf("%d heartbeats for 100 requests over %s, want 1 to %d", len(got), span.Round(time.Millisecond), most)
	}
	if last := got[len(got)-1]; last.Before(lastAsked) {
		t.Errorf("the last heartbeat came %s before the last request: that request went unanswered", lastAsked.Sub(last))
	}
	if last := got[len(got)-1]; last.Sub(lastAsked) > events.HeartbeatRequestGap+200*time.Millisecond {
		t.Errorf("the last request was answered %s after it came, want within the gap", last.Sub(lastAsked))
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < events.HeartbeatRequestGap-50*time.Millisecond {
			t.Errorf("heartbeats %d and %d came %s apart, want at least %s", i, i+1, gap, events.HeartbeatRequestGap)
		}
	}
	t.Logf("%d heartbeats for 100 requests over %s", len(got), span.Round(time.Millisecond))
}
