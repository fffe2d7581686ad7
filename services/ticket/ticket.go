// Package ticket signs and verifies route tickets: the gateway's proof that it routed a
// request to an offering. An agent serves a request only with a valid ticket for its own
// offering, and the meter bills a usage event only with a valid ticket for the offering the
// event names, once per request, so a provider can neither bill a customer for a request the
// platform did not route to it nor bill one request twice.
//
// A ticket is base64url(JSON claims) "." platform MAC "." offering MAC, each MAC an
// HMAC-SHA256 of the encoded claims. The platform MAC uses the platform's key
// (GPUMARKET_TICKET_KEY), which only the gateway and the meter hold; the offering MAC uses a key
// derived from it for the ticket's offering (OfferingKey), which that offering's agent holds.
// So an agent can check that a request was routed to it, but a provider, holding only its own
// offering's key, can forge no ticket the meter accepts: a single shared key would let any
// provider mint tickets and bill any customer. The claims are readable, not secret: they
// carry ids, no credentials.
package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header is the HTTP header the gateway hands the ticket to the backend in.
const Header = "X-GPUMarket-Ticket"

// MaxLength bounds an encoded ticket; anything longer is refused before it is decoded.
const MaxLength = 1024

// Claims are what a ticket asserts: who is billed for which request on which offering, and
// the terms fixed when the gateway routed it, which the meter bills by whenever the request's
// usage event arrives.
type Claims struct {
	RequestID  string `json:"rid"`
	AccountID  string `json:"acc"`
	APIKeyID   string `json:"key"`
	OfferingID string `json:"off"`
	Tier       string `json:"tier"`
	Kind       Kind   `json:"kind,omitempty"`
	// AskInput and AskOutput are the offering's asks in force at routing, in micro-dollars per
	// million input and output tokens: what the provider is paid, whatever it asks later.
	AskInput  int64 `json:"ai"`
	AskOutput int64 `json:"ao"`
	// PriceID names the row of the price book (prices.id) in force for the tier at routing:
	// what the customer pays. Zero only in tickets of a version that did not carry it.
	PriceID int64 `json:"pv"`
	// MaxInputTokens and MaxOutputTokens bound the billable tokens: the input by the size of
	// the body the gateway forwarded, the output by the request's max_tokens (times its
	// choices), or the model's limit when it set none. A rig reporting more is clipped to them.
	MaxInputTokens  int64 `json:"mi"`
	MaxOutputTokens int64 `json:"mo"`
	// Stream says the request asked for a streamed answer. Only then is the time to its first
	// token observable: a whole answer's first byte comes with its last, so the meter keeps no
	// first-token time for a request whose ticket does not say it was streamed.
	Stream   bool      `json:"st,omitempty"`
	IssuedAt time.Time `json:"iat"`
}

// Kind is what a request asks of the model, which decides how it is charged.
type Kind string

const (
	// KindGeneration (a chat or text completion) is charged for its input and output tokens,
	// and nothing when no output token was produced.
	KindGeneration Kind = ""
	// KindEmbedding produces no output tokens and is charged for its input tokens.
	KindEmbedding Kind = "embedding"
)

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
	key       []byte
	platform  *keyedMAC
	offerings sync.Map // offering id -> *keyedMAC
}

// NewSigner returns a signer; the key must be at least 32 bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("ticket: the key must be at least 32 bytes (GPUMARKET_TICKET_KEY)")
	}
	return &Signer{key: append([]byte(nil), key...), platform: newKeyedMAC(key)}, nil
}

// OfferingKey derives the key an offering's agent verifies its tickets with.
func OfferingKey(platformKey []byte, offeringID string) []byte {
	m := hmac.New(sha256.New, platformKey)
	m.Write([]byte("gpumarket offering ticket key v1\x00"))
	m.Write([]byte(offeringID))
	return m.Sum(nil)
}

// Sign encodes and signs the claims. IssuedAt is truncated to the millisecond.
func (s *Signer) Sign(c Claims) (string, error) {
	c.IssuedAt = c.IssuedAt.UTC().Truncate(time.Millisecond)
	if c.RequestID == "" || c.AccountID == "" || c.OfferingID == "" || c.Tier == "" || c.IssuedAt.IsZero() {
		return "", fmt.Errorf("ticket: request, account, offering, tier and issue time are required")
	}
	if c.AskInput < 0 || c.AskOutput < 0 || c.PriceID < 0 || c.MaxInputTokens < 0 || c.MaxOutputTokens < 0 {
		return "", fmt.Errorf("ticket: asks, price version and token bounds cannot be negative")
	}
	body, ok := encodeCanonical(c)
	if !ok {
		var err error
		if body, err = json.Marshal(c); err != nil {
			return "", err
		}
	}
	// The gateway signs a ticket per request: the claims are written straight into the ticket,
	// and the MACs come from HMACs keyed once, per offering for the offering's.
	const macLen = 43 // base64url of 32 bytes, unpadded
	enc := base64.RawURLEncoding
	t := make([]byte, enc.EncodedLen(len(body)), enc.EncodedLen(len(body))+2+2*macLen)
	enc.Encode(t, body)
	claims := string(t)
	var sum [sha256.Size]byte
	t = append(t, '.')
	t = enc.AppendEncode(t, s.platform.sum(sum[:0], claims))
	t = append(t, '.')
	t = enc.AppendEncode(t, s.offeringMAC(c.OfferingID).sum(sum[:0], claims))
	return string(t), nil
}

// offeringMAC is the keyed HMAC of an offering's tickets, derived once per offering.
func (s *Signer) offeringMAC(offeringID string) *keyedMAC {
	if k, ok := s.offerings.Load(offeringID); ok {
		return k.(*keyedMAC)
	}
	k, _ := s.offerings.LoadOrStore(offeringID, newKeyedMAC(OfferingKey(s.key, offeringID)))
	return k.(*keyedMAC)
}

// encodeCanonical writes the claims as encoding/json does, byte for byte, when every string
// is printable ASCII that JSON writes as is (no quote, backslash or HTML character, which
// encoding/json escapes); ok is false otherwise.
func encodeCanonical(c Claims) (b []byte, ok bool) {
	for _, v := range []string{c.RequestID, c.AccountID, c.APIKeyID, c.OfferingID, c.Tier, string(c.Kind)} {
		if !plain(v) || strings.ContainsAny(v, `"<>&`) {
			return nil, false
		}
	}
	b = make([]byte, 0, 160+len(c.RequestID)+len(c.AccountID)+len(c.APIKeyID)+len(c.OfferingID)+len(c.Tier)+len(c.Kind))
	b = append(b, `{"rid":"`...)
	b = append(b, c.RequestID...)
	b = append(b, `","acc":"`...)
	b = append(b, c.AccountID...)
	b = append(b, `","key":"`...)
	b = append(b, c.APIKeyID...)
	b = append(b, `","off":"`...)
	b = append(b, c.OfferingID...)
	b = append(b, `","tier":"`...)
	b = append(b, c.Tier...)
	if c.Kind != "" {
		b = append(b, `","kind":"`...)
		b = append(b, c.Kind...)
	}
	b = append(b, '"')
	for _, f := range c.numbers() {
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, *f.v, 10)
	}
	if c.Stream {
		b = append(b, `,"st":true`...)
	}
	b = append(b, `,"iat":"`...)
	b = c.IssuedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `"}`...)
	return b, true
}

// number is a numeric claim and its JSON name.
type number struct {
	name string
	v    *int64
}

// numbers lists the numeric claims in the order Sign writes them.
func (c *Claims) numbers() [5]number {
	return [...]number{{"ai", &c.AskInput}, {"ao", &c.AskOutput}, {"pv", &c.PriceID},
		{"mi", &c.MaxInputTokens}, {"mo", &c.MaxOutputTokens}}
}

// numberPrefixes are what Sign writes before each of the numbers, in their order.
var numberPrefixes = func() (p [5]string) {
	var c Claims
	for i, f := range c.numbers() {
		p[i] = `,"` + f.name + `":`
	}
	return p
}()

// keyedMAC hands out HMACs keyed once with one key, so that signing or checking a ticket
// costs no key schedule: the gateway signs one per request, the meter checks one per usage
// event.
type keyedMAC struct {
	pool sync.Pool
}

func newKeyedMAC(key []byte) *keyedMAC {
	k := append([]byte(nil), key...)
	return &keyedMAC{pool: sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}}
}

// sum appends the MAC of the encoded claims to b.
func (k *keyedMAC) sum(b []byte, encodedClaims string) []byte {
	m := k.pool.Get().(hash.Hash)
	defer k.pool.Put(m)
	m.Reset()
	io.WriteString(m, encodedClaims)
	return m.Sum(b)
}

// equal reports whether mac is the MAC of the encoded claims.
func (k *keyedMAC) equal(mac []byte, encodedClaims string) bool {
	var buf [sha256.Size]byte
	return hmac.Equal(mac, k.sum(buf[:0], encodedClaims))
}

// split cuts a ticket into its encoded claims and its two MACs, still encoded.
func split(t string) (enc, platformMAC, offeringMAC string, err error) {
	if len(t) == 0 || len(t) > MaxLength {
		return "", "", "", ErrMalformed
	}
	enc, rest, ok := strings.Cut(t, ".")
	if !ok {
		return "", "", "", ErrMalformed
	}
	platformMAC, offeringMAC, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(offeringMAC, ".") {
		return "", "", "", ErrMalformed
	}
	return enc, platformMAC, offeringMAC, nil
}

// decodeMAC decodes an encoded MAC into buf when it fits there. A ticket whose MACs do not
// decode is malformed, whatever its signature.
func decodeMAC(buf []byte, encoded string) ([]byte, error) {
	if n := base64.RawURLEncoding.DecodedLen(len(encoded)); n > len(buf) {
		buf = make([]byte, n)
	}
	n, err := base64.RawURLEncoding.Decode(buf, []byte(encoded))
	if err != nil {
		return nil, ErrMalformed
	}
	return buf[:n], nil
}

// decodeMACs decodes both of a ticket's MACs, as a ticket is malformed when either does not
// decode.
func decodeMACs(platform, offering *[sha256.Size]byte, platformMAC, offeringMAC string) ([]byte, []byte, error) {
	p, err := decodeMAC(platform[:], platformMAC)
	if err != nil {
		return nil, nil, err
	}
	o, err := decodeMAC(offering[:], offeringMAC)
	if err != nil {
		return nil, nil, err
	}
	return p, o, nil
}

func decodeClaims(enc string) (Claims, error) {
	body, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	c, ok := decodeCanonical(body)
	if !ok {
		// Not as Sign writes claims (escapes, other spacing or order): the full decoder.
		c = Claims{}
		if err := json.Unmarshal(body, &c); err != nil {
			return Claims{}, ErrMalformed
		}
	}
	if c.RequestID == "" || c.OfferingID == "" || c.AccountID == "" || c.IssuedAt.IsZero() {
		return Claims{}, ErrMalformed
	}
	if c.AskInput < 0 || c.AskOutput < 0 || c.PriceID < 0 || c.MaxInputTokens < 0 || c.MaxOutputTokens < 0 {
		return Claims{}, ErrMalformed
	}
	return c, nil
}

// decodeCanonical reads claims written exactly as Sign writes them, member by member in
// Claims' order with no escapes, without the reflection and allocation of encoding/json: the
// meter decodes a ticket per usage event. Anything else is not ok and left to encoding/json,
// which decodes canonical claims to the very same values.
func decodeCanonical(b []byte) (c Claims, ok bool) {
	s := string(b)
	fields := [...]struct {
		prefix string // what Sign writes before the value
		dst    *string
	}{{`{"rid":"`, &c.RequestID}, {`,"acc":"`, &c.AccountID}, {`,"key":"`, &c.APIKeyID}, {`,"off":"`, &c.OfferingID},
		{`,"tier":"`, &c.Tier}}
	for _, f := range fields {
		if s, ok = strings.CutPrefix(s, f.prefix); !ok {
			return Claims{}, false
		}
		end := strings.IndexByte(s, '"')
		if end < 0 || !plain(s[:end]) {
			return Claims{}, false
		}
		*f.dst, s = s[:end], s[end+1:]
	}
	if rest, found := strings.CutPrefix(s, `,"kind":"`); found {
		end := strings.IndexByte(rest, '"')
		if end < 0 || !plain(rest[:end]) {
			return Claims{}, false
		}
		c.Kind, s = Kind(rest[:end]), rest[end+1:]
	}
	for i, f := range c.numbers() {
		if s, ok = strings.CutPrefix(s, numberPrefixes[i]); !ok {
			return Claims{}, false
		}
		end := 0
		for end < len(s) && end < 19 && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		if end == 0 || (end > 1 && s[0] == '0') {
			return Claims{}, false
		}
		n, err := strconv.ParseInt(s[:end], 10, 64)
		if err != nil {
			return Claims{}, false
		}
		*f.v, s = n, s[end:]
	}
	s, c.Stream = strings.CutPrefix(s, `,"st":true`)
	if s, ok = strings.CutPrefix(s, `,"iat":"`); !ok {
		return Claims{}, false
	}
	end := strings.IndexByte(s, '"')
	if end < 0 || s[end+1:] != "}" {
		return Claims{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s[:end])
	if err != nil {
		return Claims{}, false
	}
	c.IssuedAt = t
	return c, true
}

// plain is true for a JSON string body that needs no unescaping and holds only printable
// ASCII.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f || s[i] == '\\' {
			return false
		}
	}
	return true
}

// Parse checks the platform's signature and returns the claims, without judging their age or
// offering.
func (s *Signer) Parse(t string) (Claims, error) {
	enc, platformEnc, offeringEnc, err := split(t)
	if err != nil {
		return Claims{}, err
	}
	var platformBuf, offeringBuf [sha256.Size]byte
	platformMAC, _, err := decodeMACs(&platformBuf, &offeringBuf, platformEnc, offeringEnc)
	if err != nil {
		return Claims{}, err
	}
	if !s.platform.equal(platformMAC, enc) {
		return Claims{}, ErrSignature
	}
	return decodeClaims(enc)
}

// Verify parses the ticket and checks that it is for the offering and was issued within
// maxAge before now (with a little clock skew allowed the other way).
func (s *Signer) Verify(t, offeringID string, now time.Time, maxAge time.Duration) (Claims, error) {
	c, err := s.Parse(t)
	if err != nil {
		return Claims{}, err
	}
	return c, checkClaims(c, offeringID, now, maxAge)
}

func checkClaims(c Claims, offeringID string, now time.Time, maxAge time.Duration) error {
	if c.OfferingID != offeringID {
		return ErrOffering
	}
	if c.IssuedAt.After(now.Add(MaxSkew)) {
		return ErrFuture
	}
	if now.Sub(c.IssuedAt) > maxAge {
		return ErrExpired
	}
	return nil
}

// OfferingVerifier checks tickets for one offering with that offering's key: what an agent
// holds.
type OfferingVerifier struct {
	key        *keyedMAC
	offeringID string
}

// NewOfferingVerifier returns the verifier of an offering's tickets.
func NewOfferingVerifier(offeringKey []byte, offeringID string) (*OfferingVerifier, error) {
	if len(offeringKey) < 32 {
		return nil, errors.New("ticket: the offering key must be at least 32 bytes")
	}
	return &OfferingVerifier{key: newKeyedMAC(offeringKey), offeringID: offeringID}, nil
}

// Verify checks the offering's MAC and that the ticket is for this offering and fresh.
func (v *OfferingVerifier) Verify(t string, now time.Time, maxAge time.Duration) (Claims, error) {
	enc, platformEnc, offeringEnc, err := split(t)
	if err != nil {
		return Claims{}, err
	}
	var platformBuf, offeringBuf [sha256.Size]byte
	_, offeringMAC, err := decodeMACs(&platformBuf, &offeringBuf, platformEnc, offeringEnc)
	if err != nil {
		return Claims{}, err
	}
	c, err := decodeClaims(enc)
	if err != nil {
		return Claims{}, err
	}
	if c.OfferingID != v.offeringID {
		return c, ErrOffering
	}
	if !v.key.equal(offeringMAC, enc) {
		return Claims{}, ErrSignature
	}
	return c, checkClaims(c, v.offeringID, now, maxAge)
}

// MaxSkew is how far ahead of a verifier's clock a ticket's issue time may be.
const MaxSkew = 5 * time.Second
