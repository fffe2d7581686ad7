package documents

import (
	"strconv"
	"strings"

	"github.com/gpumarket/gpumarket/services/money"
)

// Cents is an amount in hundredths of the document's currency, the unit a document is
// rounded to.
type Cents int64

// Decimal writes the amount as a plain decimal of the currency, "-1234.56", as the CSV
// carries it.
func (c Cents) Decimal() string {
	sign, mag := "", uint64(c)
	if c < 0 {
		sign, mag = "-", -mag // two's complement: right for the most negative value too
	}
	return sign + strconv.FormatUint(mag/100, 10) + "." + twoDigits(mag%100)
}

// currencySymbols are the currencies a document may be in, each with two decimals, and the
// symbol printed before its amounts.
var currencySymbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£"}

func validCurrency(code string) bool {
	_, ok := currencySymbols[code]
	return ok
}

// amountText writes cents for a person: the currency's symbol, the whole units grouped by
// thousands, two decimals, "-" before a negative amount: "$1,234.56", "-€5.00".
func amountText(currency string, c Cents) string {
	d := c.Decimal()
	sign := ""
	if strings.HasPrefix(d, "-") {
		sign, d = "-", d[1:]
	}
	whole, frac, _ := strings.Cut(d, ".")
	return sign + currencySymbols[currency] + grouped(whole) + "." + frac
}

// priceText writes a price per million tokens exactly, with the decimals it needs and at
// least two: "$0.149", "€2.00".
func priceText(currency string, p money.MicroUSD) string {
	whole, frac, _ := strings.Cut(p.Decimal(), ".")
	return currencySymbols[currency] + grouped(whole) + "." + frac
}

// countText writes a count grouped by thousands: "1,234,567".
func countText(n int64) string {
	d := strconv.FormatInt(n, 10)
	if strings.HasPrefix(d, "-") {
		return "-" + grouped(d[1:])
	}
	return grouped(d)
}

// grouped puts a comma between each group of three digits, counted from the right.
func grouped(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	head := len(digits) % 3
	if head > 0 {
		b.WriteString(digits[:head])
	}
	for i := head; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

func twoDigits(v uint64) string {
	if v < 10 {
		return "0" + strconv.FormatUint(v, 10)
	}
	return strconv.FormatUint(v, 10)
}
