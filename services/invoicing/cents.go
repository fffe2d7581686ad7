package invoicing

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/services/money"
)

// Cents is an amount on a document, in US cents. Lines are rounded to cents once, by
// CentsOf; a document's totals are sums of its lines' cents, so that they add up on paper.
type Cents int64

// CentsOf rounds an exact amount to the cent by the documents' one rounding rule: half up,
// away from zero ($0.005 is 1 cent, $0.004999999999 is 0, -$0.005 is -1 cent), the rule of
// money.BigPico.Decimal, which writes every amount shown to a person. An amount past the range
// of Cents (about $92 quadrillion) is money.ErrOverflow.
func CentsOf(p money.BigPico) (Cents, error) {
	s := strings.Replace(p.Decimal(2), ".", "", 1)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invoicing: %s in cents: %w", p, money.ErrOverflow)
	}
	return Cents(v), nil
}

// Pico is the amount in picodollars, for a ledger posting; an amount past the range of
// money.Pico (about $92 million) is money.ErrOverflow.
func (c Cents) Pico() (money.Pico, error) {
	if c > Cents(math.MaxInt64/money.PicoPerCent) || c < -Cents(math.MaxInt64/money.PicoPerCent) {
		return 0, fmt.Errorf("invoicing: %s in picodollars: %w", c, money.ErrOverflow)
	}
	return money.Pico(c) * money.PicoPerCent, nil
}

// BigPico is the amount in picodollars, exactly, at any size.
func (c Cents) BigPico() money.BigPico {
	var b money.BigPico
	_ = b.Scan(strconv.FormatInt(int64(c), 10) + "0000000000") // ten zeros: picodollars per cent
	return b
}

// Decimal writes the amount as dollars with two decimals: "1234.56", "-0.05".
func (c Cents) Decimal() string {
	sign, v := "", int64(c)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// String writes the amount for a person by money's one formatter: "$1,234.56", "-$0.05".
func (c Cents) String() string { return money.FormatCents(int64(c)) }
