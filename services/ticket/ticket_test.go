package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
	negative := c
	negative.MaxOutputTokens = -1
	if _, err := s.Sign(negative); err == nil {
		t.Error("a ticket with a negative token bound was signed")
	}
	// A forged ticket with a negative ask is refused even with a valid MAC: claims are checked
	// after the signature.
	negBody := []byte(`{"rid":"r","acc":"a","key":"k","off":"off","tier":"batch","ai":-5,"ao":2,"pv":3,"mi":4,"mo":5,"iat":"2026-11-30T12:00:00Z"}`)
	negEnc := base64URL(negBody)
	neg := negEnc + "." + base64URL(mac([]byte(strings.Repeat("k", 32)), negEnc)) + "." + base64URL(mac(OfferingKey([]byte(strings.Repeat("k", 32)), "off"), negEnc))
	if _, err := s.Parse(neg); !errors.Is(err, ErrMalformed) {
		t.Errorf("a ticket with a negative ask parsed: %v", err)
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

// An agent verifies its own offering's tickets with the derived key; with that key a provider
// cannot make a ticket the platform (the meter) accepts, nor one for another offering.
func TestOfferingVerifier(t *testing.T) {
	platform := []byte(strings.Repeat("p", 32))
	s, _ := NewSigner(platform)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := Claims{RequestID: "r1", AccountID: "acc", OfferingID: "off", Tier: "batch", IssuedAt: now}
	tok, _ := s.Sign(c)
	v, err := NewOfferingVerifier(OfferingKey(platform, "off"), "off")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(tok, now, time.Minute); err != nil || got != c {
		t.Fatalf("the agent refused a ticket for its offering: %v", err)
	}
	other, _ := s.Sign(Claims{RequestID: "r2", AccountID: "acc", OfferingID: "off2", Tier: "batch", IssuedAt: now})
	if _, err := v.Verify(other, now, time.Minute); !errors.Is(err, ErrOffering) {
		t.Fatalf("another offering's ticket: %v", err)
	}
	// The provider signs claims of its own with the only key it holds, in both MAC places.
	provider, _ := NewSigner(OfferingKey(platform, "off"))
	forged, _ := provider.Sign(Claims{RequestID: "r3", AccountID: "victim", OfferingID: "off", Tier: "realtime", IssuedAt: now})
	if _, err := s.Verify(forged, "off", now, time.Minute); !errors.Is(err, ErrSignature) {
		t.Fatalf("the platform accepted a ticket forged with an offering key: %v", err)
	}
	enc, _, _ := strings.Cut(forged, ".")
	handMade := enc + "." + base64URL(mac(OfferingKey(platform, "off"), enc)) + "." + base64URL(mac(OfferingKey(platform, "off"), enc))
	if _, err := s.Verify(handMade, "off", now, time.Minute); !errors.Is(err, ErrSignature) {
		t.Fatalf("the platform accepted a hand-made ticket: %v", err)
	}
	if _, err := v.Verify(tok, now.Add(time.Hour), time.Minute); !errors.Is(err, ErrExpired) {
		t.Fatalf("an old ticket: %v", err)
	}
}

func base64URL(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// The canonical decoder reads exactly what encoding/json reads from claims as Sign writes
// them, and leaves every other spelling of claims to encoding/json.
func TestDecodeCanonicalAgreesWithJSON(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 123_000_000, time.UTC)
	claims := []Claims{
		{RequestID: "req_0191a", AccountID: "0b6f", APIKeyID: "", OfferingID: "off", Tier: "batch", IssuedAt: at},
		{RequestID: `req "quoted"`, AccountID: "acc", APIKeyID: "k", OfferingID: "off", Tier: "realtime", IssuedAt: at},
		{RequestID: "req_é", AccountID: "acc", APIKeyID: "k<>&", OfferingID: "off", Tier: "standard", IssuedAt: at.Add(-time.Hour)},
		{RequestID: `back\slash`, AccountID: "acc", APIKeyID: "k", OfferingID: "off", Tier: "standard", IssuedAt: at},
		{RequestID: "req_emb", AccountID: "acc", APIKeyID: "k", OfferingID: "off", Tier: "batch", Kind: KindEmbedding, IssuedAt: at},
		{RequestID: "req_terms", AccountID: "acc", APIKeyID: "k", OfferingID: "off", Tier: "standard", AskInput: 74_667,
			AskOutput: 149_333, PriceID: 17, MaxInputTokens: 1 << 40, MaxOutputTokens: 9_223_372_036_854_775_807, IssuedAt: at},
		{RequestID: "req_stream", AccountID: "acc", APIKeyID: "k", OfferingID: "off", Tier: "realtime", PriceID: 3,
			MaxInputTokens: 40, MaxOutputTokens: 1, Stream: true, IssuedAt: at},
	}
	for _, c := range claims {
		if enc, ok := encodeCanonical(c); ok {
			if body, _ := json.Marshal(c); string(enc) != string(body) {
				t.Errorf("Sign writes %s, encoding/json %s", enc, body)
			}
		}
		body, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var want Claims
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := decodeCanonical(body)
		if ok && got != want {
			t.Errorf("decodeCanonical(%s) = %+v, encoding/json reads %+v", body, got, want)
		}
		escaped := strings.ContainsAny(string(body), `\`)
		if ok == escaped {
			t.Errorf("decodeCanonical(%s) ok = %v", body, ok)
		}
		full, err := decodeClaims(base64URL(body))
		if err != nil || full != want {
			t.Errorf("decodeClaims(%s) = %+v, %v; want %+v", body, full, err, want)
		}
	}
	for _, body := range []string{
		`{"acc":"a","rid":"r","key":"k","off":"o","tier":"batch","iat":"2026-11-30T12:00:00Z"}`,  // order
		`{"rid": "r","acc":"a","key":"k","off":"o","tier":"batch","iat":"2026-11-30T12:00:00Z"}`, // spacing
		`{"rid":"r","acc":"a","key":"k","off":"o","tier":"batch","iat":"2026-11-30T12:00:00Z","x":1}`,
		`{"rid":"r","acc":"a","key":"k","off":"o","tier":"batch","iat":"yesterday"}`,
		`{"rid":"r","acc":"a","key":"k","off":"o","tier":"batch","ai":01,"ao":2,"pv":3,"mi":4,"mo":5,"iat":"2026-11-30T12:00:00Z"}`,
		`{"rid":"r","acc":"a","key":"k","off":"o","tier":"batch","ai":-1,"ao":2,"pv":3,"mi":4,"mo":5,"iat":"2026-11-30T12:00:00Z"}`,
		`{"rid":"r","acc":"a","key":"k","off":"o","tier":"batch","ai":1,"ao":2,"pv":3,"mi":4,"mo":92233720368547758070,"iat":"2026-11-30T12:00:00Z"}`,
	} {
		if c, ok := decodeCanonical([]byte(body)); ok {
			t.Errorf("decodeCanonical(%s) = %+v, want it left to encoding/json", body, c)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	s, _ := NewSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(Claims{RequestID: "req_0191a2b3c4d5e6f7a8b9c0d1", AccountID: "0b6f1c2e-8d6a-4d7e-9c1b-2a3f4e5d6c7b",
		APIKeyID: "6c1e2d3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", OfferingID: "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", Tier: "standard",
		IssuedAt: time.Now()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Parse(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// Sign writes claims as encoding/json does, and its MACs are HMAC-SHA256 of the encoded
// claims with the platform's key and with the offering's derived key.
func TestSignWritesWhatEncodingJSONWrites(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	s, _ := NewSigner(key)
	at := time.Date(2026, 11, 30, 12, 0, 0, 120_000_000, time.UTC)
	for _, c := range []Claims{
		{RequestID: "req_019ad4b4fc00aa", AccountID: "acc", APIKeyID: "key", OfferingID: "off-1", Tier: "batch", IssuedAt: at},
		{RequestID: "req_1", AccountID: "acc", OfferingID: "off-2", Tier: "standard", Kind: KindEmbedding, IssuedAt: at.Add(time.Millisecond)},
		{RequestID: "a<b>&c", AccountID: `q"uote`, OfferingID: "off-1", Tier: "realtime", IssuedAt: at},
		{RequestID: "req_2", AccountID: "acc", APIKeyID: "key", OfferingID: "off-3", Tier: "realtime", AskInput: 135_000,
			AskOutput: 270_000, PriceID: 4, MaxInputTokens: 20_512, MaxOutputTokens: 256, IssuedAt: at},
	} {
		tok, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(tok, ".")
		body, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if want := base64URL(body); parts[0] != want {
			t.Errorf("claims %s, encoding/json writes %s", parts[0], want)
		}
		platform := hmac.New(sha256.New, key)
		platform.Write([]byte(parts[0]))
		offering := hmac.New(sha256.New, OfferingKey(key, c.OfferingID))
		offering.Write([]byte(parts[0]))
		if parts[1] != base64URL(platform.Sum(nil)) || parts[2] != base64URL(offering.Sum(nil)) {
			t.Errorf("ticket %s: MACs differ from HMAC-SHA256 of the claims", tok)
		}
		if got, err := s.Parse(tok); err != nil || got != c {
			t.Errorf("Parse = %+v, %v; want %+v", got, err, c)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	s, _ := NewSigner([]byte(strings.Repeat("k", 32)))
	c := Claims{RequestID: "req_019ad4b4fc00a1b2c3d4e5f6a7b8c9d0", AccountID: "0b6f1c2e-8d6a-4d7e-9c1b-2a3f4e5d6c7b",
		APIKeyID: "6c1e2d3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", OfferingID: "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b", Tier: "standard",
		IssuedAt: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(c); err != nil {
			b.Fatal(err)
		}
	}
}

// mac is HMAC-SHA256 of the encoded claims with key, computed the plain way.
func mac(key []byte, encodedClaims string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(encodedClaims))
	return m.Sum(nil)
}
