package accounts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// PasswordHasher hashes passwords with argon2id and stores them in the PHC string format,
// so that the parameters travel with each hash and can be raised later without a migration.
type PasswordHasher struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// DefaultHasher follows OWASP's argon2id recommendation (19 MiB, 2 passes, 1 lane): about
// 25 ms a hash on one core, which makes guessing expensive and logging in cheap.
var DefaultHasher = PasswordHasher{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// Hash returns the PHC-encoded argon2id hash of password with a random salt.
func (h PasswordHasher) Hash(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("accounts: salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, h.Time, h.MemoryKiB, h.Threads, 32)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.MemoryKiB, h.Time, h.Threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

var errBadHash = errors.New("accounts: malformed password hash")

// Verify reports whether password matches the encoded hash, in constant time.
func (PasswordHasher) Verify(password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false, errBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}
