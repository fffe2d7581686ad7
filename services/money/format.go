package money

import (
	"strconv"
	"strings"
)

// How money is written for a person, on pages, in PDFs and in CSVs meant to be read: one
// formatter, so that the same amount reads the same everywhere (docs/money.md, "Showing money").
//
//   - Balances, totals and every amount on a document are dollars and cents: FormatCents,
//     FormatBigCents, FormatCentsOf.
//   - Unit prices and one request's cost carry the decimals they need, at most six significant
//     digits: FormatPrecise. The exact figure stays in the JSON beside the page.
//   - Prices per million tokens are exact (a MicroUSD has six decimals at most): FormatPrice.
//   - Whole amounts and token counts are grouped by thousands with commas: FormatCount.
//   - A negative amount is written with one sign, the ASCII hyphen-minus before the dollar
//     sign: "-$4.61". The hyphen-minus is the sign a spreadsheet and ParseUSD read back, and
//     every font a PDF is set in has it.
//
// Rounding is Pico.Decimal's rule, half away from zero, and a figure that rounds to zero
// carries no sign. Nothing here changes a stored amount.

// Minus is the sign before a negative amount.
const Minus = "-"

// FormatBigCents writes an exact amount rounded to the cent: "$1,234.57", "-$4.61", "$0.00".
func FormatBigCents(b BigPico) string { return dollars(b.Decimal(2)) }

// FormatCentsOf writes a Pico rounded to the cent, as FormatBigCents does.
func FormatCentsOf(p Pico) string { return dollars(p.Decimal(2)) }

// FormatCents writes a whole number of cents: "$1,234.56", "-$0.05".
func FormatCents(cents int64) string {
	sign, mag := "", uint64(cents)
	if cents < 0 {
		sign, mag = "-", -mag // two's complement: right for the most negative value too
	}
	frac := strconv.FormatUint(mag%100, 10)
	if len(frac) < 2 {
		frac = "0" + frac
	}
	return dollars(sign + strconv.FormatUint(mag/100, 10) + "." + frac)
}

// PreciseDigits is how many significant digits FormatPrecise keeps.
const PreciseDigits = 6

// FormatPrecise writes an amount too small for cents to say, one request's cost or a unit
// price, with the decimals it needs: at most six significant digits, at least two decimals,
// no trailing zeros past them. "$0.196298" for $0.19629844, "$1.43713" for $1.437131703515,
// "$0.000125", "$1,234.57", "$0.00" for zero. The exact amount is in the JSON.
func FormatPrecise(b BigPico) string {
	exact := b.Decimal(picoDecimals)
	digits := strings.TrimPrefix(exact, "-")
	whole, frac, _ := strings.Cut(digits, ".")
	places := 2
	if whole != "0" {
		places = max(2, PreciseDigits-len(whole))
	} else if lead := len(frac) - len(strings.TrimLeft(frac, "0")); lead < len(frac) {
		places = min(picoDecimals, max(2, lead+PreciseDigits))
	}
	s := b.Decimal(places)
	if w, f, ok := strings.Cut(s, "."); ok && len(f) > 2 {
		s = w + "." + strings.TrimRight(f, "0")
		if _, f2, _ := strings.Cut(s, "."); len(f2) < 2 {
			s += strings.Repeat("0", 2-len(f2))
		}
	}
	return dollars(s)
}

// FormatPrecisePico writes a Pico as FormatPrecise does.
func FormatPrecisePico(p Pico) string { return FormatPrecise(BigPicoOf(p)) }

// FormatPrice writes a price (per million tokens) exactly, grouped: "$0.149", "$2.00",
// "$1,200.00".
func FormatPrice(m MicroUSD) string { return dollars(m.Decimal()) }

// FormatCount writes a count grouped by thousands: "439,684", "-1,234", "0".
func FormatCount(n int64) string {
	d := strconv.FormatInt(n, 10)
	if strings.HasPrefix(d, "-") {
		return Minus + grouped(d[1:])
	}
	return grouped(d)
}

// Counted writes a count with the noun that agrees with it, the count grouped by thousands:
// "1 request", "2 requests", "1,204 requests", "0 requests". Every page and memo that counts
// things writes them through it (docs/page-text.md, "Counts").
func Counted(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return FormatCount(n) + " " + many
}

// dollars writes a plain decimal of dollars ("-1234.5") for a person: the sign, the dollar
// sign, the whole dollars grouped by thousands, the decimals as given.
func dollars(dec string) string {
	sign := ""
	if strings.HasPrefix(dec, "-") {
		sign, dec = Minus, dec[1:]
	}
	whole, frac, hasFrac := strings.Cut(dec, ".")
	s := sign + "$" + grouped(whole)
	if hasFrac {
		s += "." + frac
	}
	return s
}

// grouped puts a comma between each group of three digits, counted from the right.
func grouped(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	head := len(digits) % 3
	b.WriteString(digits[:head])
	for i := head; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}
