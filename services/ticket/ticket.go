// Package ticket signs and verifies route tickets: the gateway's proof that it routed a
// request to an offering. An agent serves a request only with a valid ticket for its own
// offering, and the meter bills a usage event only with a valid ticket for the offering the
// event names, once per request, so a provider can neither bill a customer for a request the
// platform did not route to it nor bill one request twice.
//
// A ticket is base64url(JSON claims) "." base64url(HMAC-SHA256(key, claims)). The key comes
// from the environment (GPUMARKET_TICKET_KEY) and is shared by gateway, agents' verifier and
// meter. The claims are readable, not secret: they carry ids, no credentials.
package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Header is the HTTP header the gateway hands the ticket to the backend in.
const Header = "X-GPUMarket-Ticket"

// MaxLength bounds an encoded ticket; anything longer is refused before it is decoded.
const MaxLength = 1024

// Claims are what a ticket asserts.
type Claims struct {
	RequestID  string    `json:"rid"`
	AccountID  string    `json:"acc"`
	APIKeyID   string    `json:"key"`
	OfferingID string    `json:"off"`
	Tier       string    `json:"tier"`
	IssuedAt   time.Time `json:"iat"`
}

// Errors a verification can end in.
var (
	ErrMalformed = errors.New("ticket: malformed")
	ErrSignature = errors.New("ticket: bad signature")
	ErrExpired   = errors.New("ticket: expired")
	ErrFuture    = errors.New("ticket: issued in the future")
	ErrOffering  = errors.New("ticket: for another offering")
)

// Signer signs and verifies tickets with one key.
type Signer struct {
	key []byte
}

// NewSigner returns a signer; the key must be at least 32 bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("ticket: the key must be at least 32 bytes (GPUMARKET_TICKET_KEY)")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Sign encodes and signs the claims. IssuedAt is truncated to the millisecond.
func (s *Signer) Sign(c Claims) (string, error) {
	c.IssuedAt = c.IssuedAt.UTC().Truncate(time.Millisecond)
	if c.RequestID == "" || c.AccountID == "" || c.OfferingID == "" || c.Tier == "" || c.IssuedAt.IsZero() {
		return "", fmt.Errorf("ticket: request, account, offering, tier and issue time are required")
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding.EncodeToString(body)
	return enc + "." + base64.RawURLEncoding.EncodeToString(s.mac(enc)), nil
}

func (s *Signer) mac(encodedClaims string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(encodedClaims))
	return m.Sum(nil)
}

// Parse checks the signature and returns the claims, without judging their age or offering.
func (s *Signer) Parse(t string) (Claims, error) {
	if len(t) == 0 || len(t) > MaxLength {
		return Claims{}, ErrMalformed
	}
	enc, sig, ok := strings.Cut(t, ".")
	if !ok {
		return Claims{}, ErrMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	if !hmac.Equal(got, s.mac(enc)) {
		return Claims{}, ErrSignature
	}
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil || c.RequestID == "" || c.OfferingID == "" || c.AccountID == "" || c.IssuedAt.IsZero() {
		return Claims{}, ErrMalformed
	}
	return c, nil
}

// Verify parses the ticket and checks that it is for the offering and was issued within
// maxAge before now (with a little clock skew allowed the other way).
func (s *Signer) Verify(t, offeringID string, now time.Time, maxAge time.Duration) (Claims, error) {
	c, err := s.Parse(t)
	if err != nil {
		return Claims{}, err
	}
	if c.OfferingID != offeringID {
		return c, ErrOffering
	}
	if c.IssuedAt.After(now.Add(MaxSkew)) {
		return c, ErrFuture
	}
	if now.Sub(c.IssuedAt) > maxAge {
		return c, ErrExpired
	}
	return c, nil
}

// MaxSkew is how far ahead of a verifier's clock a ticket's issue time may be.
const MaxSkew = 5 * time.Second
