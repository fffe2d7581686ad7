package services

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NewUUID returns a random (version 4) UUID, for ids the application chooses before it writes
// a row.
func NewUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// NewTimeOrderedID returns prefix followed by 32 lower-case hex digits: the time in
// milliseconds since 1970 (12 digits), then 80 random bits. Ids made later sort later, so
// the unique indexes that hold them (usage event and request ids) grow at their right edge
// instead of splitting pages at random, and within a millisecond two ids collide with a
// chance of one in 2^80.
func NewTimeOrderedID(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// BatchRequestPrefix is the request id of a batch line's attempt, without the candidate's
// index the gateway appends: "req_" and the batch id's hex, the line and the attempt, joined
// by underscores. Interactive request ids ("req_" and hex) have no underscore after the
// prefix, so BatchOfRequest can tell a batch line's request from any other (docs/batches.md).
func BatchRequestPrefix(batchID string, line, attempt int) string {
	return "req_" + strings.TrimPrefix(batchID, "batch_") + "_" + strconv.Itoa(line) + "_" + strconv.Itoa(attempt)
}

// BatchOfRequest is the batch whose line a request served, from its request id; ok is false
// for a request that was no batch line's.
func BatchOfRequest(requestID string) (batchID string, ok bool) {
	rest, found := strings.CutPrefix(requestID, "req_")
	if !found {
		return "", false
	}
	hex, tail, found := strings.Cut(rest, "_")
	if !found || hex == "" || tail == "" {
		return "", false
	}
	return "batch_" + hex, true
}

// CanonicalUUID reports whether s is a uuid as PostgreSQL writes it: lower-case hex in groups
// of 8-4-4-4-12. Checking it before a query keeps malformed ids from aborting a caller's transaction.
func CanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
