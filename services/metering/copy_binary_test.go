package metering

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/db/dbtest"
)

// TestCopyColumnTypes holds the types copyNewUsage writes each column as (usageRows, and the
// keys) to the columns' types in the database: a value in another type's binary form would be
// refused, or misread.
func TestCopyColumnTypes(t *testing.T) {
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	ctx := context.Background()
	written := map[string][]string{
		"usage_event_keys": {"text", "text", "timestamp with time zone", "bigint"},
		"usage_events": {"text", "text", "uuid", "text", "uuid", "uuid", "text", "text", "bigint", "bigint", "bigint",
			"bigint", "double precision", "double precision", "double precision", "text", "text", "bigint", "bigint",
			"bigint", "bigint", "bigint", "numeric", "numeric", "text", "text", "timestamp with time zone",
			"timestamp with time zone", "bigint", "bigint", "bigint", "bigint", "bigint"},
	}
	columns := map[string][]string{"usage_event_keys": usageKeyColumns, "usage_events": usageColumns}
	for table, types := range written {
		if len(types) != len(columns[table]) {
			t.Fatalf("%s: %d types for %d columns", table, len(types), len(columns[table]))
		}
		for i, col := range columns[table] {
			var typ string
			if err := pool.QueryRow(ctx, `SELECT atttypid::regtype::text FROM pg_attribute
				WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, table, col).Scan(&typ); err != nil {
				t.Fatalf("%s.%s: %v", table, col, err)
			}
			if typ != types[i] {
				t.Errorf("%s.%s is %s; the meter writes it as %s", table, col, typ, types[i])
			}
		}
	}
}

// TestCopyRowsRoundTrip writes values of every type copyRows writes and reads them back.
func TestCopyRowsRoundTrip(t *testing.T) {
	dbtest.SkipShort(t)
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE copy_check (i text, t text, n bigint, f double precision, u uuid,
		ts timestamptz, num numeric(38, 0), nt text)`); err != nil {
		t.Fatal(err)
	}
	nums := []int64{0, 1, 9, 9999, 10000, 10001, 100000000, 123400005678, 1_000_000_000_000_000_000, math.MaxInt64, -1, -10000, math.MinInt64}
	at := time.Date(2026, 12, 2, 1, 2, 3, 456789999, time.FixedZone("x", 3600))
	pre := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}
	rows := newCopyRows(8)
	defer rows.release()
	for i, v := range nums {
		ts := at
		if i%2 == 1 {
			ts = pre
		}
		rows.row()
		rows.text(fmt.Sprintf("%02d", i))
		rows.text("é\"x")
		rows.int8(v)
		rows.float8(float64(v) / 3)
		rows.uuid(u)
		rows.timestamptz(ts)
		rows.numeric(v)
		rows.nullableText("set", i%2 == 0)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return copyIn(ctx, tx, "copy_check", []string{"i", "t", "n", "f", "u", "ts", "num", "nt"}, rows)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := pool.Query(ctx, `SELECT i, t, n, f, u::text, ts, num::text, nt FROM copy_check ORDER BY i`)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	var seen []int64
	for i := 0; got.Next(); i++ {
		var (
			name, s, uu, num string
			n                int64
			f                float64
			ts               time.Time
			nt               *string
		)
		if err := got.Scan(&name, &s, &n, &f, &uu, &ts, &num, &nt); err != nil {
			t.Fatal(err)
		}
		v := nums[i]
		want := at.Truncate(time.Microsecond)
		if i%2 == 1 {
			want = pre
		}
		if s != "é\"x" || n != v || f != float64(v)/3 || uu != "12345678-9abc-def0-0102-030405060708" ||
			!ts.Equal(want) || (nt != nil) != (i%2 == 0) {
			t.Errorf("row %d: %q %d %v %s %s %v", i, s, n, f, uu, ts, nt)
		}
		if num != strconv.FormatInt(v, 10) {
			t.Errorf("numeric %d read back as %s", v, num)
		}
		seen = append(seen, n)
	}
	if err := got.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, nums) {
		t.Errorf("read back %v, want %v", seen, nums)
	}
}
