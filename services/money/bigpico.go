package money

import (
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// BigPico is an amount in picodollars of any size: a sum that may pass the range of Pico
// (±$9.2 million), as a ledger balance, a provider's earnings over months or a usage total
// read from PostgreSQL NUMERIC can. It holds every NUMERIC(38,0) exactly, and any sum of
// them. It is a value, comparable with == (two BigPicos are equal exactly when their amounts
// are): arithmetic returns a new BigPico; the zero value is $0. Arithmetic on it is slower
// than on a Pico, which stays the type of charges and postings; a BigPico is for reading
// sums back and adding a few of them up.
//
// It writes itself as Pico does (String, Decimal) and as a JSON number, so an API field that
// was a Pico keeps its shape when it becomes a BigPico.
type BigPico struct {
	dec string // the amount in canonical decimal: no leading zeros, "-" for a negative one, "" for zero
}

var _ sql.Scanner = (*BigPico)(nil)

// BigPicoOf is p as a BigPico.
func BigPicoOf(p Pico) BigPico {
	if p == 0 {
		return BigPico{}
	}
	return BigPico{dec: strconv.FormatInt(int64(p), 10)}
}

func bigPicoOfInt(v *big.Int) BigPico {
	if v.Sign() == 0 {
		return BigPico{}
	}
	return BigPico{dec: v.String()}
}

func (b BigPico) int() *big.Int {
	v := new(big.Int)
	if b.dec != "" {
		v.SetString(b.dec, 10) // canonical by construction
	}
	return v
}

// Add returns b+o, exactly.
func (b BigPico) Add(o BigPico) BigPico {
	switch {
	case b.dec == "":
		return o
	case o.dec == "":
		return b
	}
	return bigPicoOfInt(new(big.Int).Add(b.int(), o.int()))
}

// AddPico returns b+p, exactly.
func (b BigPico) AddPico(p Pico) BigPico { return b.Add(BigPicoOf(p)) }

// Neg returns -b.
func (b BigPico) Neg() BigPico {
	switch {
	case b.dec == "":
		return b
	case b.dec[0] == '-':
		return BigPico{dec: b.dec[1:]}
	}
	return BigPico{dec: "-" + b.dec}
}

// Sign is -1, 0 or 1 as b is negative, zero or positive.
func (b BigPico) Sign() int {
	switch {
	case b.dec == "":
		return 0
	case b.dec[0] == '-':
		return -1
	}
	return 1
}

// Cmp compares b and o: -1, 0 or 1 as b is less than, equal to or greater than o.
func (b BigPico) Cmp(o BigPico) int { return b.int().Cmp(o.int()) }

// Equal reports whether b is exactly p.
func (b BigPico) Equal(p Pico) bool { return b == BigPicoOf(p) }

// Pico is b as a Pico, or ErrOverflow when it is outside the range of Pico.
func (b BigPico) Pico() (Pico, error) {
	if b.dec == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(b.dec, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("money: %s: %w", b, ErrOverflow)
	}
	return Pico(v), nil
}

// Decimal writes the amount in dollars with exactly places decimals, by Pico.Decimal's rule:
// exact up to twelve places, fewer round half up (away from zero), and an amount that rounds
// to zero carries no minus sign.
func (b BigPico) Decimal(places int) string {
	places = max(places, 0)
	mag := new(big.Int).Abs(b.int())
	kept := min(places, picoDecimals)
	unit := new(big.Int).SetUint64(pow10(picoDecimals - kept))
	q, r := new(big.Int).QuoRem(mag, unit, new(big.Int))
	if new(big.Int).Lsh(r, 1).Cmp(unit) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	whole, frac := new(big.Int).QuoRem(q, new(big.Int).SetUint64(pow10(kept)), new(big.Int))

	var s strings.Builder
	if b.Sign() < 0 && q.Sign() != 0 {
		s.WriteByte('-')
	}
	s.WriteString(whole.String())
	if places > 0 {
		s.WriteByte('.')
		f := frac.String()
		s.WriteString(strings.Repeat("0", kept-len(f)))
		s.WriteString(f)
		s.WriteString(strings.Repeat("0", places-kept))
	}
	return s.String()
}

// String writes the exact amount in dollars as Pico.String does: "$0.60", "$-1.25",
// "$12345678.000000000001".
func (b BigPico) String() string { return dollarText(b.Decimal(picoDecimals)) }

// MarshalJSON writes the amount as a JSON number of picodollars, as a Pico is written.
func (b BigPico) MarshalJSON() ([]byte, error) {
	if b.dec == "" {
		return []byte("0"), nil
	}
	return []byte(b.dec), nil
}

// UnmarshalJSON reads a JSON number of whole picodollars, of any size.
func (b *BigPico) UnmarshalJSON(data []byte) error {
	v, ok := new(big.Int).SetString(string(data), 10)
	if !ok {
		return fmt.Errorf("money: %.40q is not a whole number of picodollars", data)
	}
	*b = bigPicoOfInt(v)
	return nil
}

// Scan reads a whole number of picodollars from the database: a NUMERIC (which pgx hands over
// as its text), a bigint, or text. NULL is an error, not zero: a sum that may be empty is
// written coalesce(sum(...), 0).
func (b *BigPico) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		return errors.New("money: a NULL amount")
	case int64:
		*b = BigPicoOf(Pico(v))
		return nil
	case []byte:
		return b.scanText(string(v))
	case string:
		return b.scanText(v)
	default:
		return fmt.Errorf("money: cannot read an amount from %T", src)
	}
}

// scanText reads the text of a NUMERIC: digits with an optional sign, and a fraction that
// must be zero (a NUMERIC of another scale writes one).
func (b *BigPico) scanText(s string) error {
	whole, frac, _ := strings.Cut(s, ".")
	if strings.Trim(frac, "0") != "" {
		return fmt.Errorf("money: %.60q is not a whole number of picodollars", s)
	}
	v, ok := new(big.Int).SetString(whole, 10)
	if !ok {
		return fmt.Errorf("money: %.60q is not a number of picodollars", s)
	}
	*b = bigPicoOfInt(v)
	return nil
}
