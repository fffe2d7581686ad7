package metering

import (
	"encoding/binary"
	"math"
	"sync"
	"time"
)

// copyRows builds a batch's rows in COPY's binary format, value by value, for the types the
// meter writes. Handed to pgx's CopyFrom instead, every row is a fresh []any of boxed values,
// each of which pgx looks up an encoding plan for before it writes it: about a third of what
// the meter's process spent on a batch's transaction. The bytes are the same: each value in
// PostgreSQL's binary form of its column's type (TestCopyColumnTypes holds the types to the
// tables'), so that the database checks and stores every row exactly as before.
type copyRows struct {
	b    []byte
	cols int16
}

// copyBuffers keeps the buffers of batches committed, so that the next batch writes into
// one already grown.
var copyBuffers sync.Pool

// newCopyRows starts a COPY of rows of cols values each.
func newCopyRows(cols int) *copyRows {
	c := &copyRows{cols: int16(cols)}
	if b, ok := copyBuffers.Get().(*[]byte); ok {
		c.b = (*b)[:0]
	}
	c.b = append(c.b, "PGCOPY\n\377\r\n\000"...)
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // flags
	c.b = binary.BigEndian.AppendUint32(c.b, 0) // no header extension
	return c
}

// bytes ends the COPY and returns it.
func (c *copyRows) bytes() []byte {
	return binary.BigEndian.AppendUint16(c.b, 0xffff) // int16 -1: no more rows
}

// release hands the buffer back for another batch; c is not used after it.
func (c *copyRows) release() {
	b := c.b[:0]
	c.b = nil
	copyBuffers.Put(&b)
}

func (c *copyRows) row() { c.b = binary.BigEndian.AppendUint16(c.b, uint16(c.cols)) }

func (c *copyRows) length(n int) { c.b = binary.BigEndian.AppendUint32(c.b, uint32(int32(n))) }

func (c *copyRows) null() { c.length(-1) }

// text is a text value: its bytes, which the database verifies as the text it takes from any
// client.
func (c *copyRows) text(s string) {
	c.length(len(s))
	c.b = append(c.b, s...)
}

// nullableText is NULL when valid is false.
func (c *copyRows) nullableText(s string, valid bool) {
	if !valid {
		c.null()
		return
	}
	c.text(s)
}

// int8 is a bigint.
func (c *copyRows) int8(v int64) {
	c.length(8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

// nullableFloat8 is NULL when valid is false.
func (c *copyRows) nullableFloat8(v float64, valid bool) {
	if !valid {
		c.null()
		return
	}
	c.float8(v)
}

// float8 is a double precision.
func (c *copyRows) float8(v float64) {
	c.length(8)
	c.b = binary.BigEndian.AppendUint64(c.b, math.Float64bits(v))
}

// uuid is a uuid's 16 bytes.
func (c *copyRows) uuid(u [16]byte) {
	c.length(16)
	c.b = append(c.b, u[:]...)
}

// microsFromUnixToY2K is the microseconds from the Unix epoch to PostgreSQL's, 2000-01-01 UTC.
const microsFromUnixToY2K = 946684800 * 1_000_000

// timestamptz is a timestamp with time zone: microseconds since 2000-01-01 UTC, the time
// truncated to the microsecond as the database stores it.
func (c *copyRows) timestamptz(t time.Time) {
	c.length(8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(t.Unix()*1_000_000+int64(t.Nanosecond()/1000)-microsFromUnixToY2K))
}

// numeric is an integer as a numeric of scale 0: its base-10,000 digits, most significant
// first, without trailing zero digits (the weight places them).
func (c *copyRows) numeric(v int64) {
	var digits [5]uint16 // an int64 has at most 19 decimal digits: five base-10,000 digits
	sign := uint16(0)
	u := uint64(v)
	if v < 0 {
		sign, u = 0x4000, uint64(-(v+1))+1 // -MinInt64 without overflow
	}
	n := 0
	for ; u > 0; u /= 10000 {
		digits[len(digits)-1-n] = uint16(u % 10000)
		n++
	}
	weight := n - 1
	ds := digits[len(digits)-n:]
	for len(ds) > 0 && ds[len(ds)-1] == 0 {
		ds = ds[:len(ds)-1]
	}
	if n == 0 {
		weight = 0
	}
	c.length(8 + 2*len(ds))
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(len(ds)))
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(int16(weight)))
	c.b = binary.BigEndian.AppendUint16(c.b, sign)
	c.b = binary.BigEndian.AppendUint16(c.b, 0) // dscale
	for _, d := range ds {
		c.b = binary.BigEndian.AppendUint16(c.b, d)
	}
}
