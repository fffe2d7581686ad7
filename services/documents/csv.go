package documents

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/services"
)

// linesHeader names the columns of LinesCSV.
var linesHeader = []string{"document", "line", "kind", "description", "usage_period", "input_tokens", "output_tokens",
	"input_price_per_million", "output_price_per_million", "amount", "exact_amount", "currency",
	"cached_input_tokens", "cached_input_price_per_million"}

// LinesCSV writes the document's lines to w as CSV, one row per line in the document's order
// (credits lines included), after a header row. The cached input tokens of a usage line, a part
// of its input tokens, and their price come last, so that readers of the earlier columns read
// them where they were. Figures are exact and unformatted: tokens
// as integers, prices per million tokens with the decimals they have, amount in the
// currency with two decimals, exact_amount with twelve ("" when the line has none).
// usage_period is the earlier period of a late-usage line, "2026-02" for a month. Text
// that others chose (descriptions) is defused for spreadsheets (services.CSVText).
func LinesCSV(w io.Writer, d Document) (err error) {
	defer services.Wrap(&err, "documents.LinesCSV(%s %q)", d.Kind, d.Number)
	if err := d.Validate(); err != nil {
		return err
	}
	number := d.Number
	if d.Status == StatusDraft {
		number = "DRAFT"
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(linesHeader); err != nil {
		return err
	}
	for i, l := range d.Lines {
		row := []string{services.CSVText(number), strconv.Itoa(i + 1), string(l.Kind), services.CSVText(l.Description),
			"", "", "", "", "", l.Amount.Decimal(), "", d.Currency, "", ""}
		if l.ForPeriod != nil {
			row[4] = periodKey(*l.ForPeriod)
		}
		if t := l.Tokens; t != nil {
			row[5], row[6] = strconv.FormatInt(t.Input, 10), strconv.FormatInt(t.Output, 10)
			row[12] = strconv.FormatInt(t.CachedInput, 10)
			if !t.Unpriced {
				row[7], row[8] = t.InputPrice.Decimal(), t.OutputPrice.Decimal()
				if t.CachedInput != 0 {
					row[13] = t.CachedInputPrice.Decimal()
				}
			}
		}
		if l.Exact != nil {
			row[10] = l.Exact.Decimal(12)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// periodKey writes a calendar month as "2026-02" and any other period by its first and last
// days, "2026-02-01/2026-02-15".
func periodKey(p Period) string {
	if p.IsMonth() {
		return p.Start.UTC().Format("2006-01")
	}
	return p.Start.UTC().Format(time.DateOnly) + "/" + p.End.UTC().Add(-time.Nanosecond).Format(time.DateOnly)
}
