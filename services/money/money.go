// Package money holds the exact units prices are written in. Amounts are integers; decimal
// text is parsed digit by digit and never passes through a float.
package money

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MicroUSD is an amount in millionths of a US dollar. Prices per million tokens are written
// in it: $0.149 per million tokens is MicroUSD(149000).
type MicroUSD int64

// MaxMicroUSD bounds parsed amounts well inside int64 (a billion dollars).
const MaxMicroUSD = MicroUSD(1_000_000_000 * 1_000_000)

var errSyntax = errors.New("enter an amount in dollars, like 0.15")

// ParseMicroUSD reads a non-negative dollar amount such as "0.149", "$2" or "12.5", with at
// most six decimals.
func ParseMicroUSD(s string) (MicroUSD, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$"))
	if s == "" {
		return 0, errSyntax
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" {
		whole = "0"
	}
	if len(frac) > 6 {
		return 0, errors.New("use at most six decimals")
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, errSyntax
			}
		}
	}
	if len(whole) > 10 {
		return 0, errors.New("that amount is too large")
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, errSyntax
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	m := MicroUSD(w*1_000_000 + f)
	if m > MaxMicroUSD {
		return 0, errors.New("that amount is too large")
	}
	return m, nil
}

// String writes the amount in dollars with the decimals it needs, at least two: "$0.149",
// "$2.00", "$0.000125".
func (m MicroUSD) String() string {
	return "$" + m.Decimal()
}

// Decimal writes the amount as a plain decimal string of dollars, at least two decimals.
func (m MicroUSD) Decimal() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign, v = "-", -v
	}
	frac := fmt.Sprintf("%06d", v%1_000_000)
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, v/1_000_000, frac)
}

// MarshalJSON writes the amount as a decimal string of dollars, so that no client reads it
// into a float by accident.
func (m MicroUSD) MarshalJSON() ([]byte, error) { return []byte(`"` + m.Decimal() + `"`), nil }

// UnmarshalJSON accepts a decimal string ("0.149") or a JSON number (0.149), reading the
// number's text exactly.
func (m *MicroUSD) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseMicroUSD(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}
