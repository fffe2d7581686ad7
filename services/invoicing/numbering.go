package invoicing

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Document numbers (see docs/invoicing.md, "Numbers"). An issued invoice, and apart from it an
// issued statement, takes the next number of its series in the year it is issued (UTC): the
// first of a year is the configured first number if the series has never numbered a document
// (so that a previous system's sequence can be continued), else 1. A draft holds no number. The
// number is taken in the transaction that issues the document, which holds its series' row
// until it commits: two approvers queue on it, and a transaction that fails gives its number
// back, so numbers run without gaps or repeats.

// Default number formats and first number.
const (
	DefaultInvoiceNumberFormat   = "GPM-{year}-{seq:06}"
	DefaultStatementNumberFormat = "GPS-{year}-{seq:06}"
	DefaultFirstNumber           = 1
)

// DraftNumber is what a draft shows where an issued document shows its number.
const DraftNumber = "DRAFT"

// series names a sequence of numbers.
type series string

const (
	seriesInvoice   series = "invoice"
	seriesStatement series = "statement"
)

// NumberFormat writes a series' numbers: a layout of literal text with {year} (four digits)
// and {seq} or {seq:0N} (the number in the year, zero-padded to N digits), and the first
// number of the series.
type NumberFormat struct {
	layout string
	first  int64
	pad    int
}

var (
	layoutToken   = regexp.MustCompile(`\{[^}]*\}`)
	layoutLiteral = regexp.MustCompile(`^[A-Za-z0-9 ._/#-]*$`)
	seqToken      = regexp.MustCompile(`^\{seq(?::0([1-9]|1[0-2]))?\}$`)
)

// ParseNumberFormat checks a layout and a first number.
func ParseNumberFormat(layout string, first int64) (NumberFormat, error) {
	f := NumberFormat{layout: layout, first: first}
	if first < 1 || first > 1_000_000_000_000 {
		return f, fmt.Errorf("the first number %d: use a whole number from 1", first)
	}
	years, seqs := 0, 0
	for _, tok := range layoutToken.FindAllString(layout, -1) {
		switch m := seqToken.FindStringSubmatch(tok); {
		case tok == "{year}":
			years++
		case m != nil:
			seqs++
			if m[1] != "" {
				f.pad, _ = strconv.Atoi(m[1])
			}
		default:
			return f, fmt.Errorf("number format %q: %s is not {year}, {seq} or {seq:0N} with N from 1 to 12", layout, tok)
		}
	}
	if years != 1 || seqs != 1 {
		return f, fmt.Errorf("number format %q: write {year} once and {seq} (or {seq:06}) once: numbers restart every year", layout)
	}
	if !layoutLiteral.MatchString(layoutToken.ReplaceAllString(layout, "")) || len(layout) > 60 {
		return f, fmt.Errorf("number format %q: use letters, digits, spaces and . _ / # - around the fields, at most 60 characters", layout)
	}
	return f, nil
}

// Number is the document number of seq in year.
func (f NumberFormat) Number(year int, seq int64) string {
	return layoutToken.ReplaceAllStringFunc(f.layout, func(tok string) string {
		if tok == "{year}" {
			return fmt.Sprintf("%04d", year)
		}
		return fmt.Sprintf("%0*d", f.pad, seq)
	})
}

// First is the number of a series' first document.
func (f NumberFormat) First() int64 { return f.first }

// String is the layout.
func (f NumberFormat) String() string { return f.layout }

// nextNumber takes the next number of the series in year, inside tx. It locks the series'
// row for the year until tx ends.
func nextNumber(ctx context.Context, tx pgx.Tx, s series, year int, first int64) (int64, error) {
	var n int64
	err := tx.QueryRow(ctx, `
		INSERT INTO document_sequences (series, year, last_number)
		VALUES ($1, $2, CASE WHEN EXISTS (SELECT 1 FROM document_sequences WHERE series = $1) THEN 1 ELSE $3::bigint END)
		ON CONFLICT (series, year) DO UPDATE SET last_number = document_sequences.last_number + 1
		RETURNING last_number`, string(s), year, first).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("invoicing: the next %s number of %d: %w", s, year, err)
	}
	return n, nil
}

// creditNoteNumber is the number of an invoice's seq-th credit note: <number>-CN01.
func creditNoteNumber(invoiceNumber string, seq int) string {
	return invoiceNumber + "-CN" + fmt.Sprintf("%02d", seq)
}

// displayNumber is a document's number as pages show it: DRAFT until it is issued.
func displayNumber(number string) string {
	if strings.TrimSpace(number) == "" {
		return DraftNumber
	}
	return number
}
