package money

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"
)

// A BigPico within the range of Pico writes itself exactly as the Pico does, to every number
// of places and as JSON.
func TestBigPicoWritesAsPicoDoes(t *testing.T) {
	prop := func(v int64, places uint8) bool {
		p, b := Pico(v), BigPicoOf(Pico(v))
		pj, _ := json.Marshal(p)
		bj, _ := json.Marshal(b)
		back, err := b.Pico()
		return p.String() == b.String() && p.Decimal(int(places%16)) == b.Decimal(int(places%16)) &&
			string(pj) == string(bj) && err == nil && back == p
	}
	cfg := &quick.Config{MaxCount: 20_000, Rand: randSource(9), Values: smallAndLargeInt64s(1)}
	cfg.Values = func(args []reflect.Value, r *rand.Rand) {
		smallAndLargeInt64s(1)(args[:1], r)
		args[1] = reflect.ValueOf(uint8(r.Intn(16)))
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

// Past the range of Pico, sums stay exact: a balance of $9.2 million and more, and one of
// minus as much.
func TestBigPicoBeyondTheRangeOfPico(t *testing.T) {
	max := BigPicoOf(math.MaxInt64)
	over := max.AddPico(1)
	if got := over.String(); got != "$9223372.036854775808" {
		t.Errorf("MaxInt64 + 1 picodollars = %s", got)
	}
	if _, err := over.Pico(); !errors.Is(err, ErrOverflow) {
		t.Errorf("Pico() of MaxInt64 + 1 = %v, want ErrOverflow", err)
	}
	huge := max.Add(max).Add(max) // $27.67 million
	if got := huge.Decimal(2); got != "27670116.11" {
		t.Errorf("3 x MaxInt64 to the cent = %s", got)
	}
	if got := huge.Neg().String(); got != "$-27670116.110564327421" {
		t.Errorf("-3 x MaxInt64 = %s", got)
	}
	if got := huge.Neg().Decimal(0); got != "-27670116" {
		t.Errorf("-3 x MaxInt64 to the dollar = %s", got)
	}
	// Half a cent rounds away from zero, and a sum that rounds to zero has no sign.
	if got := BigPicoOf(-5 * PicoPerCent / 10).Decimal(2); got != "-0.01" {
		t.Errorf("-$0.005 to the cent = %s", got)
	}
	if got := BigPicoOf(-4 * PicoPerCent / 10).Decimal(2); got != "0.00" {
		t.Errorf("-$0.004 to the cent = %s", got)
	}
	if huge.Cmp(max) <= 0 || huge.Neg().Sign() != -1 || (BigPico{}).Sign() != 0 || !(BigPico{}).Equal(0) {
		t.Error("comparisons of large amounts")
	}
	if max.Sign() != 1 || !max.Equal(math.MaxInt64) {
		t.Error("the operands changed: arithmetic must return new values")
	}

	// Equal amounts are equal values, however they were reached.
	if max.Add(max.Neg()) != (BigPico{}) || huge.Add(max.Neg()) != max.Add(max) || BigPicoOf(-3).Neg() != BigPicoOf(3) {
		t.Error("equal amounts compare unequal")
	}

	var back BigPico
	if err := back.Scan("-0007"); err != nil || back != BigPicoOf(-7) {
		t.Errorf("-0007 read as %s, %v", back, err)
	}
	b, _ := json.Marshal(huge)
	if string(b) != "27670116110564327421" || json.Unmarshal(b, &back) != nil || back.Cmp(huge) != 0 {
		t.Errorf("JSON round trip: %s -> %s", b, back)
	}
	if err := json.Unmarshal([]byte(`"12"`), &back); err == nil {
		t.Error("a JSON string read as an amount")
	}
}

// Scan reads what PostgreSQL writes for a NUMERIC, a bigint or text, and refuses NULL and
// fractions.
func TestBigPicoScan(t *testing.T) {
	cases := []struct {
		src  any
		want string
		err  bool
	}{
		{"12345678901234567890123456789012345678", "$12345678901234567890123456.789012345678", false},
		{"-99999999999999999999999999999999999999", "$-99999999999999999999999999.999999999999", false},
		{[]byte("150"), "$0.00000000015", false},
		{"42.000", "$0.000000000042", false},
		{"-0", "$0.00", false},
		{int64(-7), "$-0.000000000007", false},
		{"1.5", "", true},
		{"abc", "", true},
		{nil, "", true},
		{3.5, "", true},
	}
	for _, c := range cases {
		var b BigPico
		err := b.Scan(c.src)
		if c.err != (err != nil) || (!c.err && b.String() != c.want) {
			t.Errorf("Scan(%v) = %s, %v; want %s (error %v)", c.src, b, err, c.want, c.err)
		}
	}
}
