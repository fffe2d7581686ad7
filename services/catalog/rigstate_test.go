package catalog

import (
	"testing"
	"time"
)

// TestRigStateReasons: each state in its provider's words, with the figures it rests on.
func TestRigStateReasons(t *testing.T) {
	now := time.Date(2026, 12, 5, 14, 10, 0, 0, time.UTC)
	at := func(hhmm string) *time.Time {
		v, err := time.Parse("2006-01-02 15:04", "2026-12-05 "+hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	yesterday := now.AddDate(0, 0, -1).Add(-time.Hour)
	for _, c := range []struct {
		o    Offering
		want string
	}{
		{Offering{RigState: RigPending}, "Pending: waiting for your agent to connect"},
		{Offering{RigState: RigPending, RigHeartbeatAt: at("14:09")}, "Pending: 0 of 3 probes passed"},
		{Offering{RigState: RigPending, RigHeartbeatAt: at("14:09"), RigProbePasses: 2}, "Pending: 2 of 3 probes passed"},
		{Offering{RigState: RigPending, RigHeartbeatAt: at("14:09"), RigProbeProblem: "it answered 503"},
			"Pending: 0 of 3 probes passed; the last one failed: it answered 503"},
		{Offering{RigState: RigActive, RigStateSince: *at("14:05")}, "Active since 14:05 UTC"},
		{Offering{RigState: RigActive, RigStateSince: yesterday}, "Active since 13:10 UTC on 4 Dec 2026"},
		{Offering{RigState: RigOffline, RigStateSince: *at("14:03"), RigHeartbeatAt: at("14:02")}, "Offline: no heartbeat since 14:02 UTC"},
		{Offering{RigState: RigOffline, RigStateSince: *at("14:03"), RigHeartbeatAt: at("14:09"), RigProbePasses: 1},
			"Offline since 14:03 UTC: heartbeats are back, 1 of 3 probes passed"},
	} {
		if got := c.o.RigStateReason(now); got != c.want {
			t.Errorf("RigStateReason(%+v) = %q; want %q", c.o, got, c.want)
		}
	}
}
