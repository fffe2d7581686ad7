package money

import (
	"errors"
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"
)

func TestChargeFor(t *testing.T) {
	cases := []struct {
		name   string
		tokens int64
		price  MicroUSD
		want   Pico
		err    bool
	}{
		{"one token at one unit is one picodollar", 1, 1, 1, false},
		{"a million tokens at $0.60 per million", 1_000_000, 600_000, 60 * PicoPerCent, false},
		{"seven tokens at $0.149 per million", 7, 149_000, 1_043_000, false},
		{"no tokens", 0, 600_000, 0, false},
		{"free tier", 1_000_000, 0, 0, false},
		{"largest that fits", math.MaxInt64 / 3, 3, Pico(math.MaxInt64 / 3 * 3), false},
		{"one past the range", math.MaxInt64/3 + 1, 3, 0, true},
		{"the price ceiling times a million tokens", 1_000_000, MaxMicroUSD, 0, true},
		{"negative tokens", -1, 600_000, 0, true},
		{"negative price", 1, -1, 0, true},
	}
	for _, c := range cases {
		got, err := ChargeFor(c.tokens, c.price)
		if c.err {
			if err == nil {
				t.Errorf("%s: ChargeFor(%d, %d) = %d, want an error", c.name, c.tokens, c.price, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: ChargeFor(%d, %d) = %d, %v; want %d", c.name, c.tokens, c.price, got, err, c.want)
		}
	}
	if _, err := ChargeFor(math.MaxInt64, 2); !errors.Is(err, ErrOverflow) {
		t.Errorf("overflow error = %v, want ErrOverflow", err)
	}
}

// TestChargeForMatchesExactProduct checks ChargeFor against arbitrary-precision integers: it
// returns the exact product whenever the product fits, and ErrOverflow exactly when it does not.
func TestChargeForMatchesExactProduct(t *testing.T) {
	maxPico := big.NewInt(math.MaxInt64)
	prop := func(tokens int64, price int64) bool {
		tokens, price = abs(tokens), abs(price)
		exact := new(big.Int).Mul(big.NewInt(tokens), big.NewInt(price))
		got, err := ChargeFor(tokens, MicroUSD(price))
		if exact.Cmp(maxPico) > 0 {
			return errors.Is(err, ErrOverflow)
		}
		return err == nil && big.NewInt(int64(got)).Cmp(exact) == 0
	}
	cfg := &quick.Config{MaxCount: 20_000, Rand: randSource(1), Values: smallAndLargeInt64s(2)}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

func TestAdd(t *testing.T) {
	cases := []struct {
		a, b Pico
		want Pico
		err  bool
	}{
		{1, 2, 3, false},
		{-5, 3, -2, false},
		{math.MaxInt64, 0, math.MaxInt64, false},
		{math.MaxInt64, 1, 0, true},
		{math.MinInt64, -1, 0, true},
		{math.MinInt64, math.MaxInt64, -1, false},
		{math.MaxInt64, math.MaxInt64, 0, true},
	}
	for _, c := range cases {
		got, err := c.a.Add(c.b)
		if c.err {
			if !errors.Is(err, ErrOverflow) {
				t.Errorf("%d.Add(%d) = %d, %v; want ErrOverflow", c.a, c.b, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%d.Add(%d) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
	prop := func(a, b int64) bool {
		exact := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
		got, err := Pico(a).Add(Pico(b))
		if !exact.IsInt64() {
			return errors.Is(err, ErrOverflow)
		}
		return err == nil && int64(got) == exact.Int64()
	}
	cfg := &quick.Config{MaxCount: 20_000, Rand: randSource(3), Values: smallAndLargeInt64s(2)}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

func TestDecimalRoundsHalfUpAwayFromZero(t *testing.T) {
	cases := []struct {
		p      Pico
		places int
		want   string
	}{
		{0, 2, "0.00"},
		{PicoPerCent / 2, 2, "0.01"},            // $0.005: half rounds up
		{PicoPerCent/2 - 1, 2, "0.00"},          // just under half rounds down
		{-PicoPerCent / 2, 2, "-0.01"},          // half rounds away from zero
		{-(PicoPerCent/2 - 1), 2, "0.00"},       // rounds to zero: no minus sign
		{3*PicoPerCent/2 + 0, 2, "0.02"},        // $0.015
		{PicoPerUSD - 1, 2, "1.00"},             // carries into the dollars
		{-(PicoPerUSD + PicoPerUSD/2), 0, "-2"}, // $-1.5 with no decimals
		{PicoPerUSD + PicoPerUSD/2 - 1, 0, "1"},
		{149_000, 12, "0.000000149000"},
		{149_000, 14, "0.00000014900000"},
		{1, 12, "0.000000000001"},
		{1, 11, "0.00000000000"},
		{5, 11, "0.00000000001"},
		{12 * PicoPerUSD, -3, "12"},
		{math.MaxInt64, 12, "9223372.036854775807"},
		{math.MinInt64, 12, "-9223372.036854775808"},
		{math.MaxInt64, 2, "9223372.04"},
		{math.MinInt64, 0, "-9223372"},
	}
	for _, c := range cases {
		if got := c.p.Decimal(c.places); got != c.want {
			t.Errorf("Pico(%d).Decimal(%d) = %q, want %q", int64(c.p), c.places, got, c.want)
		}
	}
}

func TestPicoString(t *testing.T) {
	for p, want := range map[Pico]string{
		0:                   "$0.00",
		60 * PicoPerCent:    "$0.60",
		149_000:             "$0.000000149",
		-PicoPerUSD / 4 * 5: "$-1.25",
		1:                   "$0.000000000001",
		7 * PicoPerUSD:      "$7.00",
	} {
		if got := p.String(); got != want {
			t.Errorf("Pico(%d).String() = %q, want %q", int64(p), got, want)
		}
	}
}

func TestParseUSD(t *testing.T) {
	cases := []struct {
		in   string
		want Pico
		bad  bool
	}{
		{"12.5", 12*PicoPerUSD + PicoPerUSD/2, false},
		{"$0.000000000149", 149, false},
		{" -3 ", -3 * PicoPerUSD, false},
		{"-$0.01", -PicoPerCent, false},
		{"$-0.01", -PicoPerCent, false},
		{"+1", PicoPerUSD, false},
		{".5", PicoPerUSD / 2, false},
		{"0.000000000001", 1, false},
		{"9223372.036854775807", math.MaxInt64, false},
		{"-9223372.036854775807", -math.MaxInt64, false},
		{"9223372.036854775808", 0, true},
		{"99999999999999999999999", 0, true},
		{"0.0000000000001", 0, true},
		{"1e3", 0, true},
		{"1,000", 0, true},
		{"--1", 0, true},
		{"", 0, true},
		{"$", 0, true},
		{".", 0, true},
		{"-", 0, true},
	}
	for _, c := range cases {
		got, err := ParseUSD(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("ParseUSD(%q) = %d, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	if _, err := ParseUSD("10000000"); !errors.Is(err, ErrOverflow) {
		t.Errorf("ParseUSD of ten million dollars: %v, want ErrOverflow", err)
	}
}

// TestParseUSDReadsBackWhatIsWritten: the exact text of any amount parses to the same amount.
func TestParseUSDReadsBackWhatIsWritten(t *testing.T) {
	prop := func(v int64) bool {
		if v == math.MinInt64 { // its magnitude is past the parsed range, by design symmetric
			return true
		}
		p := Pico(v)
		a, errA := ParseUSD(p.Decimal(12))
		b, errB := ParseUSD(p.String())
		return errA == nil && errB == nil && a == p && b == p
	}
	cfg := &quick.Config{MaxCount: 20_000, Rand: randSource(5), Values: smallAndLargeInt64s(1)}
	if err := quick.Check(prop, cfg); err != nil {
		t.Fatal(err)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		if v == math.MinInt64 {
			return math.MaxInt64
		}
		return -v
	}
	return v
}

// randSource gives testing/quick a fixed seed, so that a failure repeats.
func randSource(seed int64) *rand.Rand { return rand.New(rand.NewSource(seed)) }

// smallAndLargeInt64s draws n int64 arguments, half of them near the edges of the range and
// half small, so that both the overflow boundary and ordinary amounts are exercised.
func smallAndLargeInt64s(n int) func([]reflect.Value, *rand.Rand) {
	return func(args []reflect.Value, r *rand.Rand) {
		for i := range n {
			var v int64
			switch r.Intn(4) {
			case 0:
				v = r.Int63() // anywhere
			case 1:
				v = math.MaxInt64 - r.Int63n(1<<20)
			case 2:
				v = r.Int63n(1 << 32)
			default:
				v = r.Int63n(1_000_000_000)
			}
			if r.Intn(2) == 0 {
				v = -v
			}
			args[i] = reflect.ValueOf(v)
		}
	}
}
