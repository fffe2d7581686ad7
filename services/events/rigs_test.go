package events

import (
	"strings"
	"testing"
)

func TestRigPasswordIsDerivedPerOfferingAndKey(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	a := RigPassword(key, "off-a")
	if a != RigPassword(key, "off-a") {
		t.Error("RigPassword is not deterministic")
	}
	if a == RigPassword(key, "off-b") {
		t.Error("two offerings got the same password")
	}
	if a == RigPassword([]byte("another key, another platform....."), "off-a") {
		t.Error("two keys gave the same password")
	}
	if len(a) != 43 || strings.ContainsAny(a, "+/=:@") {
		t.Errorf("password %q: want 43 base64url characters, safe in a URL", a)
	}
}

// A re-issued credential is another password, and the first issue is the password rigs held before credentials
// could be re-issued, so that no rig listed earlier is shut out by the change.
func TestRigPasswordIssuesDiffer(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	first := RigPasswordIssue(key, "off-a", 1)
	if first != RigPassword(key, "off-a") || first != RigPasswordIssue(key, "off-a", 0) {
		t.Error("the first issue is not RigPassword's")
	}
	// HMAC-SHA256(key, "gpumarket rig NATS password v1\x00off-a"), as every earlier version derived it.
	if want := "YLOMuzDQTM9b0h1YFkbevtlPJAlD7wPdPIiEvSUahW8"; first != want {
		t.Errorf("first issue %q, want the password earlier versions gave, %q", first, want)
	}
	seen := map[string]int{first: 1}
	for issue := 2; issue <= 4; issue++ {
		p := RigPasswordIssue(key, "off-a", issue)
		if n, dup := seen[p]; dup {
			t.Errorf("issues %d and %d have the same password", n, issue)
		}
		seen[p] = issue
		if p == RigPasswordIssue(key, "off-b", issue) {
			t.Errorf("issue %d of two offerings has the same password", issue)
		}
	}
}
