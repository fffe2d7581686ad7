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

// amountText writes cents for a person by money's one formatter, in the currency's symbol: the
// whole units grouped by thousands, two decimals, "-" before a negative amount: "$1,234.56",
// "-€5.00".
func amountText(currency string, c Cents) string {
	return strings.Replace(money.FormatCents(int64(c)), "$", currencySymbols[currency], 1)
}

// priceText writes a price per million tokens exactly, with the decimals it needs and at
// least two: "$0.149", "€2.00".
func priceText(currency string, p money.MicroUSD) string {
	return strings.Replace(money.FormatPrice(p), "$", currencySymbols[currency], 1)
}

// countText writes a count grouped by thousands: "1,234,567".
func countText(n int64) string { return money.FormatCount(n) }

func twoDigits(v uint64) string {
	if v < 10 {
		return "0" + strconv.FormatUint(v, 10)
	}
	return strconv.FormatUint(v, 10)
}
