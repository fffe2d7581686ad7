package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Pico is an amount in picodollars, 1e-12 US dollar: the charge of one token at a price of
// one MicroUSD per million tokens. Charges, ledger postings and balances are written in it,
// so that every per-token charge is a whole number and sums of charges are exact.
//
// Pico is an int64, so one value spans ±$9,223,372.036854775807. That bounds one charge, one
// ledger posting and one balance read into Go; sums that may grow past it (a platform
// account over years) are kept in PostgreSQL NUMERIC(38,0), and arithmetic here reports
// ErrOverflow instead of wrapping around.
type Pico int64

const (
	// PicoPerUSD is one US dollar.
	PicoPerUSD Pico = 1_000_000_000_000
	// PicoPerCent is one US cent, the unit Stripe charges in.
	PicoPerCent Pico = PicoPerUSD / 100
)

// picoDecimals is how many decimal places of a dollar a Pico holds exactly.
const picoDecimals = 12

// ErrOverflow reports arithmetic whose exact result does not fit in a Pico.
var ErrOverflow = errors.New("money: amount out of range")

// ChargeFor is what tokens cost at price (MicroUSD per million tokens): exactly
// tokens × price picodollars, since 1e-6 dollar per 1e6 tokens is 1e-12 dollar per token.
// Negative tokens or prices are refused; a product past the range of Pico is ErrOverflow.
func ChargeFor(tokens int64, price MicroUSD) (Pico, error) {
	if tokens < 0 || price < 0 {
		return 0, fmt.Errorf("money.ChargeFor(%d, %d): tokens and price must not be negative", tokens, int64(price))
	}
	if price != 0 && tokens > math.MaxInt64/int64(price) {
		return 0, fmt.Errorf("money.ChargeFor(%d, %d): %w", tokens, int64(price), ErrOverflow)
	}
	return Pico(tokens * int64(price)), nil
}

// Add returns p+q, or ErrOverflow when the exact sum does not fit in a Pico.
func (p Pico) Add(q Pico) (Pico, error) {
	s := p + q
	// Two's-complement addition overflowed exactly when both operands share a sign and the
	// sum does not.
	if (p >= 0) == (q >= 0) && (s >= 0) != (p >= 0) {
		return 0, fmt.Errorf("money: %d + %d: %w", int64(p), int64(q), ErrOverflow)
	}
	return s, nil
}

// Decimal writes the amount in dollars with exactly places decimals (negative places count
// as zero). Up to twelve places the text is exact; fewer places round half up, away from
// zero: with places 2, $0.004999999999 is "0.00", $0.005 is "0.01" and -$0.005 is "-0.01".
// An amount that rounds to zero carries no minus sign. This is the one rounding rule of
// money shown to a person; stored amounts are never rounded.
func (p Pico) Decimal(places int) string {
	places = max(places, 0)
	mag := uint64(p)
	if p < 0 {
		mag = -mag // two's complement: also right for math.MinInt64
	}
	kept := min(places, picoDecimals)
	unit := pow10(picoDecimals - kept)
	q, r := mag/unit, mag%unit
	if r >= unit-r { // r >= unit/2 without losing the half of an odd unit
		q++
	}
	whole, frac := q/pow10(kept), q%pow10(kept)

	var b strings.Builder
	if p < 0 && q != 0 {
		b.WriteByte('-')
	}
	b.WriteString(strconv.FormatUint(whole, 10))
	if places > 0 {
		b.WriteByte('.')
		f := strconv.FormatUint(frac, 10)
		b.WriteString(strings.Repeat("0", kept-len(f)))
		b.WriteString(f)
		b.WriteString(strings.Repeat("0", places-kept))
	}
	return b.String()
}

// String writes the exact amount in dollars with the decimals it needs, at least two:
// "$0.60", "$0.000000000149", "$-1.25". It never rounds; use Decimal to round for display.
func (p Pico) String() string { return dollarText(p.Decimal(picoDecimals)) }

// dollarText writes a decimal of dollars with every picodollar place as "$" and the decimals it
// needs, at least two.
func dollarText(s string) string {
	s = strings.TrimRight(s, "0")
	if dot := strings.IndexByte(s, '.'); len(s)-dot-1 < 2 {
		s += strings.Repeat("0", 2-(len(s)-dot-1))
	}
	return "$" + s
}

// ParseUSD reads a dollar amount exactly, digit by digit: "12.5", "$0.000000000149",
// "-3", "-$0.01" or "$-0.01", with at most twelve decimals. Negative amounts are accepted
// because adjustments may take money away; callers that need a positive amount check it.
func ParseUSD(s string) (Pico, error) {
	s = strings.TrimSpace(s)
	neg := false
	s = strings.TrimPrefix(s, "$")
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg = s[0] == '-'
		s = s[1:]
	}
	s = strings.TrimPrefix(s, "$")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" {
		return 0, errSyntax
	}
	if len(frac) > picoDecimals {
		return 0, errors.New("use at most twelve decimals")
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, errSyntax
			}
		}
	}
	w := uint64(0)
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil {
			return 0, fmt.Errorf("that amount is too large: %w", ErrOverflow)
		}
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", picoDecimals-len(frac)), 10, 64)
	}
	if w > (math.MaxInt64-f)/uint64(PicoPerUSD) {
		return 0, fmt.Errorf("that amount is too large: %w", ErrOverflow)
	}
	v := Pico(w*uint64(PicoPerUSD) + f)
	if neg {
		v = -v
	}
	return v, nil
}

func pow10(n int) uint64 {
	v := uint64(1)
	for range n {
		v *= 10
	}
	return v
}
