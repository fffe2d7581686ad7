package documents

import (
	"fmt"
	"strings"
	"sync"

	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/sfnt"
)

// The documents print in the Go fonts, regular and bold, embedded in every PDF: their
// glyphs cover Latin, Greek and Cyrillic with "€", "₂" and the Polish letters; see
// docs/documents.md, "The font".
var (
	fontsOnce sync.Once
	fonts     []*sfnt.Font
	fontsErr  error
)

func parsedFonts() ([]*sfnt.Font, error) {
	fontsOnce.Do(func() {
		for _, ttf := range [][]byte{goregular.TTF, gobold.TTF} {
			f, err := sfnt.Parse(ttf)
			if err != nil {
				fontsErr = fmt.Errorf("parse the documents' font: %w", err)
				return
			}
			fonts = append(fonts, f)
		}
	})
	return fonts, fontsErr
}

// Printable returns an error naming the characters of s that the documents' font has no
// glyph for, and nil when it can print all of s, in regular and in bold. A document with
// such text is refused rather than printed with empty boxes in a legal name or an address;
// a form that takes text for documents (billing details) can check it as it is entered.
func Printable(s string) error {
	fs, err := parsedFonts()
	if err != nil {
		return err
	}
	var buf sfnt.Buffer
	var missing []string
	for _, r := range s {
		for _, f := range fs {
			if i, err := f.GlyphIndex(&buf, r); err != nil || i == 0 {
				missing = append(missing, fmt.Sprintf("%q", r))
				break
			}
		}
		if len(missing) == 5 {
			break
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the document's font cannot print %s", strings.Join(missing, ", "))
	}
	return nil
}
