package ticket

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	s, err := NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := Claims{RequestID: "req_1", AccountID: "acc", APIKeyID: "key", OfferingID: "off", Tier: "batch", IssuedAt: now}
	tok, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok, "off", now.Add(time.Minute), time.Hour)
	if err != nil || got != c {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	other, _ := NewSigner([]byte(strings.Repeat("x", 32)))
	enc, sig, _ := strings.Cut(tok, ".")
	forgedClaims := enc[:10] + flip(enc[10]) + enc[11:]
	cases := []struct {
		name string
		tok  string
		off  string
		at   time.Time
		want error
	}{
		{"another offering", tok, "off2", now, ErrOffering},
		{"too old", tok, "off", now.Add(2 * time.Hour), ErrExpired},
		{"from the future", tok, "off", now.Add(-time.Minute), ErrFuture},
		{"signed with another key", mustSign(t, other, c), "off", now, ErrSignature},
		{"changed claims", forgedClaims + "." + sig, "off", now, ErrSignature},
		{"no signature", enc, "off", now, ErrMalformed},
		{"empty", "", "off", now, ErrMalformed},
		{"oversized", strings.Repeat("a", MaxLength+1), "off", now, ErrMalformed},
	}
	for _, tc := range cases {
		if _, err := s.Verify(tc.tok, tc.off, tc.at, time.Hour); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewSigner([]byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
	if _, err := s.Sign(Claims{RequestID: "r"}); err == nil {
		t.Error("a ticket without offering was signed")
	}
}

func mustSign(t *testing.T, s *Signer, c Claims) string {
	tok, err := s.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func FuzzParse(f *testing.F) {
	s, _ := NewSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(Claims{RequestID: "r", AccountID: "a", OfferingID: "o", Tier: "batch", IssuedAt: time.Unix(1, 0)})
	f.Add(tok)
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := s.Parse(in)
		if err == nil && in != tok {
			// A different string may verify only if it decodes to the same signed bytes.
			again, _ := s.Sign(c)
			if _, err := s.Parse(again); err != nil {
				t.Fatalf("re-signed claims do not parse: %v", err)
			}
		}
	})
}

func flip(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}
