package services

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
// milliseconds since 1970 (12 digits), then 80 bits that are random for the first id of a
// millisecond. Ids made later sort later, so the unique indexes that hold them (usage event and
// request ids) grow at their right edge instead of splitting pages at random, and lists that
// page by id (files, batches) keep the order things were made in.
//
// Within one process the ids of one millisecond keep that order too: each after the first adds
// a random step of 1 to 2^32 to the one before it, so two files uploaded in the same millisecond
// list in the order they were uploaded. Ids made in different processes in the same millisecond
// are in no particular order among themselves, and collide with a chance of about one in 2^80.
func NewTimeOrderedID(prefix string, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	lastID.Lock()
	if ms == lastID.ms {
		var step [4]byte
		_, _ = rand.Read(step[:])
		addToTail(&lastID.tail, uint64(binary.BigEndian.Uint32(step[:]))+1)
	} else {
		lastID.ms = ms
		_, _ = rand.Read(lastID.tail[:]) // crypto/rand.Read never fails
	}
	copy(b[6:], lastID.tail[:])
	lastID.Unlock()
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return prefix + hex.EncodeToString(b[:])
}

// lastID is the millisecond and the random tail of the last time-ordered id this process made.
var lastID struct {
	sync.Mutex
	ms   uint64
	tail [10]byte
}

// addToTail adds n to the 80-bit big-endian tail. A carry out of its top bit is dropped, which
// would put the id after it before the ones of its millisecond made earlier: from a random start,
// with steps below 2^32, even a million ids in one millisecond reach the top with a chance below
// one in 2^28.
func addToTail(tail *[10]byte, n uint64) {
	for i := len(tail) - 1; i >= 0 && n > 0; i-- {
		sum := uint64(tail[i]) + n&0xff
		tail[i] = byte(sum)
		n = n>>8 + sum>>8
	}
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
