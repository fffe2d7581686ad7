package events

import (
	"strings"
	"testing"
)

// The spellings are the wire protocol rigs in the field speak and the streams on a running cluster hold: each is
// pinned here, so that a change to one fails.
func TestSubjectsAreSpelledAsRigsUseThem(t *testing.T) {
	t.Parallel()
	for got, want := range map[string]string{
		UsageSubject("prov-1", "off-1"):                 "usage.prov-1.off-1",
		UsageSubject(AnyID, AnyID):                      "usage.*.*",
		Below(UsagePrefix):                              "usage.>",
		UsageStream:                                     "USAGE",
		UsageConsumer:                                   "meter",
		UsagePausedSubject:                              "usage_paused",
		UsageConfigLockBucket:                           "USAGE_CONFIG_LOCK",
		RejectedStream:                                  "USAGE_REJECTED",
		RejectedSubject("schema"):                       "usage_rejected.schema",
		Below(RejectedPrefix):                           "usage_rejected.>",
		MeteredSubject:                                  "metered.usage",
		CeilingBenchConsumer:                            "meterbench_ceiling",
		ObservedSubject:                                 "routing.observed",
		KeyChangesSubject:                               "api_keys.changed",
		HeartbeatSubject("prov-1", "off-1"):             "heartbeat.prov-1.off-1",
		Below(HeartbeatPrefix):                          "heartbeat.>",
		HeartbeatRequestSubject:                         "heartbeat_request",
		RigInboxPrefix("prov-1", "off-1"):               "_INBOX_RIG.prov-1.off-1",
		RigCallSubject("prov-1", "off-1"):               "rigcall.prov-1.off-1",
		RigCallRequestSubject("prov-1", "off-1"):        "rigcall.prov-1.off-1.call",
		RigControlSubject("prov-1", "off-1", "tok"):     "rigcall.prov-1.off-1.tok",
		Child(RigControlSubject("p", "o", "tok"), "7"):  "rigcall.p.o.tok.7",
		AnyToken(RigControlSubject("p", "o", "tok")):    "rigcall.p.o.tok.*",
		RigReplySubject("prov-1", "off-1"):              "rigreply.prov-1.off-1",
		RigAnswerSubject("prov-1", "off-1", "gw", "2s"): "rigreply.prov-1.off-1.gw.2s",
		RigAnswersSubject("gw"):                         "rigreply.*.*.gw.*",
		RigCallQueue:                                    "rig",
		RigsAccount:                                     "RIGS",
		PlatformAccount:                                 "PLATFORM",
		SystemAccount:                                   "SYS",
		AuthCalloutSubject:                              "$SYS.REQ.USER.AUTH",
		AuthCalloutQueue:                                "gpumarket-rigauth",
		ConnzPingSubject:                                "$SYS.REQ.SERVER.PING.CONNZ",
		KickSubject("NDJWE4SOUJOJT2TY5Y2YQEOAHGAK5VIGXTGKWJSZVRNJKKW3HKX6XAZA"): "$SYS.REQ.SERVER.NDJWE4SOUJOJT2TY5Y2YQEOAHGAK5VIGXTGKWJSZVRNJKKW3HKX6XAZA.KICK",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// What a rig may do is the list it always was, subject for subject.
func TestRigPermissionsAreTheRigsOwnSubjects(t *testing.T) {
	t.Parallel()
	publish, subscribe := RigPermissions("prov-1", "off-1")
	if got, want := strings.Join(publish, " "), "usage.prov-1.off-1 heartbeat.prov-1.off-1 rigreply.prov-1.off-1.>"; got != want {
		t.Errorf("publish %s, want %s", got, want)
	}
	if got, want := strings.Join(subscribe, " "),
		"_INBOX_RIG.prov-1.off-1.> heartbeat_request rigcall.prov-1.off-1 rigcall.prov-1.off-1.>"; got != want {
		t.Errorf("subscribe %s, want %s", got, want)
	}
}

// A rig's subject parses back into the ids it was built from, at the longest ids too.
func TestRigSubjectsRoundTrip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxIDLength)
	for _, ids := range [][2]string{{"prov-1", "off-1"}, {"7c1f0e52-3a4b", "off_B-9"}, {long, long}} {
		for _, c := range []struct {
			name  string
			build func(string, string) string
			parse func(string) (string, string, error)
		}{
			{"usage", UsageSubject, ParseUsageSubject},
			{"heartbeat", HeartbeatSubject, ParseHeartbeatSubject},
		} {
			subject := c.build(ids[0], ids[1])
			p, o, err := c.parse(subject)
			if err != nil || p != ids[0] || o != ids[1] {
				t.Errorf("%s: parse(%q) = %q, %q, %v", c.name, subject, p, o, err)
			}
		}
		if p, o := UsageSubjectIDs(UsageSubject(ids[0], ids[1])); p != ids[0] || o != ids[1] {
			t.Errorf("UsageSubjectIDs(UsageSubject(%q, %q)) = %q, %q", ids[0], ids[1], p, o)
		}
	}
	if got := LastToken(RigAnswerSubject("p", "o", "gw", "2s")); got != "2s" {
		t.Errorf("LastToken of an answer subject = %q, want its call id", got)
	}
	if a, b := NewToken(), NewToken(); a == b || a == "" || strings.ContainsAny(a, ".*> ") || a == rigCallToken {
		t.Errorf("NewToken gave %q and %q: want two distinct subject tokens", a, b)
	}
}

// A malformed subject names no rig: each is refused with an error that quotes it.
func TestMalformedRigSubjectsAreRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "usage", "usage.p", "usage.p.o.x", "heartbeat.p.o", "Usage.p.o", "usage..o",
		"usage.p.", ".usage.p.o", "usage.*.o", "usage.p.>", "usage.p q.o", "usage.p.o\n", "usage.p.o/x",
		"usage." + strings.Repeat("p", MaxIDLength+1) + ".o", "usage.p." + strings.Repeat("o", MaxIDLength+1)} {
		if p, o, err := ParseUsageSubject(s); err == nil {
			t.Errorf("ParseUsageSubject(%q) = %q, %q", s, p, o)
		} else if !strings.Contains(err.Error(), "subject") {
			t.Errorf("ParseUsageSubject(%q): %v does not say it is the subject", s, err)
		}
	}
	for _, s := range []string{"", "heartbeat", "heartbeat.p", "heartbeat.p.o.x", "usage.p.o", "heartbeat_request",
		"heartbeat..o", "heartbeat.p.", "heartbeat.*.*", "heartbeat.>", "heartbeat.p.o.>"} {
		if p, o, err := ParseHeartbeatSubject(s); err == nil {
			t.Errorf("ParseHeartbeatSubject(%q) = %q, %q", s, p, o)
		}
	}
	// UsageSubjectIDs names what it can of a malformed subject, so that its refusal is counted against that rig.
	for s, want := range map[string][2]string{"usage": {"", ""}, "usage.p": {"p", ""}, "usage.p.o.x": {"p", "o"},
		"usage..o": {"", "o"}} {
		if p, o := UsageSubjectIDs(s); p != want[0] || o != want[1] {
			t.Errorf("UsageSubjectIDs(%q) = %q, %q, want %q, %q", s, p, o, want[0], want[1])
		}
	}
}

func TestCheckID(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "off-1", "prov_2", "7c1f0e52-3a4b-4c8d-9e2f-0a1b2c3d4e5f", strings.Repeat("z", MaxIDLength)} {
		if err := CheckID(ok); err != nil {
			t.Errorf("CheckID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*", ">", "a.b", "a b", "é", "a\x00", strings.Repeat("z", MaxIDLength+1)} {
		if err := CheckID(bad); err == nil {
			t.Errorf("CheckID(%q) = nil", bad)
		}
	}
}
