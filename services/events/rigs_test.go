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
