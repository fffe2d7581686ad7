package core

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
)

// USD writes an amount (a money.Pico or a money.BigPico) as exact decimal dollars without the sign.
func USD(p fmt.Stringer) string { return strings.TrimPrefix(p.String(), "$") }

// JSONText reads a JSON value that may be a string or a number as the text it holds: a
// string's content, a number's exact digits (never through a float), "" for null or absent.
func JSONText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// PricesInTierOrder lists the prices in force at now in the order pages show tiers: each tier's
// default, then the models' own prices in it, by model.
func PricesInTierOrder(book catalog.PriceBook, now time.Time) []catalog.Price {
	models := book.ModelsAt(now)
	out := make([]catalog.Price, 0, len(book))
	for _, t := range catalog.Tiers {
		if p, ok := book.At(t, "", now); ok {
			out = append(out, p)
		}
		for _, m := range slices.Sorted(maps.Keys(models[t])) {
			out = append(out, models[t][m])
		}
	}
	return out
}

// MinuteUTC is how the finance pages write and read a moment: to the minute, in UTC.
const MinuteUTC = "2006-01-02 15:04"

// Clip shortens s to at most n bytes, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// CentsText writes whole cents as dollars: "$1234.56".
func CentsText(cents int64) string { return money.FormatCents(cents) }

// Count writes a count of requests or tokens grouped by thousands, as every page does.
func Count(n int64) string { return money.FormatCount(n) }

// LastMonth is the first and the last day of the calendar month before now's, UTC.
func LastMonth(now time.Time) (first, last time.Time) {
	now = now.UTC()
	this := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	return this.AddDate(0, -1, 0), this.AddDate(0, 0, -1)
}
