package webhooks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// secretPrefix begins every signing secret, as the specification writes them: the rest is the
// key in base64.
const secretPrefix = "whsec_"

// newSecret makes a signing secret: 24 random bytes, within the 24 to 64 the specification asks.
func newSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return secretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// secretHint is how an endpoint's secret is told apart once it is no longer shown.
func secretHint(secret string) string { return secret[:len(secretPrefix)+4] }

// Sign is the webhook-signature header of a message: "v1," and the base64 HMAC-SHA256, under
// the secret's key, of the message's id, its timestamp in Unix seconds and its body, joined by dots.
func Sign(secret, msgID string, at time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", errors.New("webhooks: a signing secret is whsec_ and base64")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// seal encrypts a secret for the database (AES-256-GCM, the nonce first), bound to its
// endpoint so that a sealed secret copied to another row does not open.
func (s *Service) seal(endpointID, secret string) []byte {
	aead := s.aead()
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, []byte(secret), []byte(endpointID))
}

// open decrypts a sealed secret.
func (s *Service) open(endpointID string, sealed []byte) (string, error) {
	aead := s.aead()
	if len(sealed) < aead.NonceSize() {
		return "", errors.New("webhooks: sealed secret too short")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(endpointID))
	if err != nil {
		return "", errors.New("webhooks: the endpoint's secret does not open with this key (was GPUMARKET_WEBHOOK_KEY changed?)")
	}
	return string(plain), nil
}

func (s *Service) aead() cipher.AEAD {
	block, err := aes.NewCipher(s.key[:])
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}
