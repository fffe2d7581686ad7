package money

import (
	"math"
	"testing"
)

func bigOf(t *testing.T, usd string) BigPico {
	t.Helper()
	p, err := ParseUSD(usd)
	if err != nil {
		t.Fatalf("ParseUSD(%q): %v", usd, err)
	}
	return BigPicoOf(p)
}

// The figures of the report that found money shown unrounded, each written as a page now
// shows it.
func TestFormatBigCents(t *testing.T) {
	huge := BigPico{dec: "123456789012345678901234567"} // $123,456,789,012,345.678901234567
	for _, c := range []struct {
		in   BigPico
		want string
	}{
		{bigOf(t, "5.495276953795"), "$5.50"},
		{bigOf(t, "-0.19629844"), "-$0.20"},
		{bigOf(t, "-67"), "-$67.00"},
		{bigOf(t, "-4.61"), "-$4.61"},
		{bigOf(t, "0"), "$0.00"},
		{bigOf(t, "0.000000000001"), "$0.00"},
		{bigOf(t, "-0.004999999999"), "$0.00"}, // rounds to zero: no sign
		{bigOf(t, "-0.005"), "-$0.01"},
		{bigOf(t, "1.005"), "$1.01"},
		{bigOf(t, "1234567.891"), "$1,234,567.89"},
		{bigOf(t, "999.995"), "$1,000.00"},
		{huge, "$123,456,789,012,345.68"},
		{huge.Neg(), "-$123,456,789,012,345.68"},
	} {
		if got := FormatBigCents(c.in); got != c.want {
			t.Errorf("FormatBigCents(%s) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := FormatCentsOf(Pico(math.MinInt64)); got != "-$9,223,372.04" {
		t.Errorf("FormatCentsOf(MinInt64) = %q", got)
	}
}

func TestFormatCents(t *testing.T) {
	for in, want := range map[int64]string{0: "$0.00", 5: "$0.05", -5: "-$0.05", 2292: "$22.92", -6700: "-$67.00",
		123456789: "$1,234,567.89", math.MinInt64: "-$92,233,720,368,547,758.08"} {
		if got := FormatCents(in); got != want {
			t.Errorf("FormatCents(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatPrecise(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"-0.19629844", "-$0.196298"},
		{"1.437131703515", "$1.43713"},
		{"0", "$0.00"},
		{"0.000125", "$0.000125"},
		{"0.000000000149", "$0.000000000149"},
		{"0.000001234567", "$0.00000123457"},
		{"0.0009999996", "$0.001"},
		{"0.5", "$0.50"},
		{"12.5", "$12.50"},
		{"1234.5678", "$1,234.57"},
		{"123456.789", "$123,456.79"}, // never fewer than cents
		{"-1000000", "-$1,000,000.00"},
	} {
		if got := FormatPrecise(bigOf(t, c.in)); got != c.want {
			t.Errorf("FormatPrecise(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFormatPriceAndCount(t *testing.T) {
	for m, want := range map[MicroUSD]string{149_000: "$0.149", 2_000_000: "$2.00", 125: "$0.000125",
		1_200_000_000: "$1,200.00", -1_500_000: "-$1.50"} {
		if got := FormatPrice(m); got != want {
			t.Errorf("FormatPrice(%d) = %q, want %q", int64(m), got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 439684: "439,684", -1234: "-1,234",
		1234567890: "1,234,567,890", math.MaxInt64: "9,223,372,036,854,775,807"} {
		if got := FormatCount(n); got != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, got, want)
		}
	}
}
