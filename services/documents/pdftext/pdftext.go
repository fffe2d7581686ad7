// Package pdftext reads back the text the platform's PDFs print, for tests: the documents'
// own, and those of the pages that serve them, which check that a PDF holds what it should.
// It decodes each run's character codes through its font's ToUnicode map as the PDF declares
// it. (The reader's own decoding is not used: it adds a range's offset to the last byte only,
// which is right for the ranges the PDF specification allows, and fpdf declares a single range
// over all 65,536 two-byte codes; see docs/documents.md, "The font".)
package pdftext

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Run is one piece of text a PDF shows with one operator: what one cell of the layout holds.
type Run struct {
	Page int
	Font string // the font's base name
	Text string
}

// Runs reads back the text of every page, one run per text-showing operator, in order.
func Runs(b []byte) (runs []Run, err error) {
	defer func() {
		// The reader panics on a malformed content stream.
		if r := recover(); r != nil {
			err = fmt.Errorf("pdftext: the PDF does not read: %v", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("pdftext: the PDF does not open: %w", err)
	}
	for n := 1; n <= r.NumPage(); n++ {
		page := r.Page(n)
		res := page.Resources().Key("Font")
		fonts := map[string]toUnicode{}
		for _, key := range res.Keys() {
			if fonts[key], err = readToUnicode(res.Key(key)); err != nil {
				return nil, err
			}
		}
		var font toUnicode
		var failed error
		pdf.Interpret(page.V.Key("Contents"), func(stk *pdf.Stack, op string) {
			args := make([]pdf.Value, stk.Len())
			for i := len(args) - 1; i >= 0; i-- {
				args[i] = stk.Pop()
			}
			if failed != nil {
				return
			}
			var text string
			switch op {
			case "Tf":
				var ok bool
				if font, ok = fonts[args[0].Name()]; !ok {
					failed = fmt.Errorf("pdftext: page %d selects font %s, which it does not have", n, args[0].Name())
				}
				return
			case "Tj":
				text = args[0].RawString()
			case "TJ":
				var s strings.Builder
				for i := 0; i < args[0].Len(); i++ {
					if v := args[0].Index(i); v.Kind() == pdf.String {
						s.WriteString(v.RawString())
					}
				}
				text = s.String()
			default:
				return
			}
			decoded, err := font.decode(text)
			if err != nil {
				failed = err
				return
			}
			runs = append(runs, Run{Page: n, Font: font.base, Text: decoded})
		})
		if failed != nil {
			return nil, failed
		}
	}
	return runs, nil
}

// Texts is the text of every run, as a set.
func Texts(runs []Run) map[string]bool {
	out := map[string]bool{}
	for _, r := range runs {
		out[r.Text] = true
	}
	return out
}

// toUnicode is a font's map from character codes to text.
type toUnicode struct {
	base   string
	width  int // bytes per code
	ranges []codeRange
}

type codeRange struct{ lo, hi, dst int }

var (
	cmapBlock = regexp.MustCompile(`(?s)begin(bfrange|bfchar|codespacerange)(.*?)end(bfrange|bfchar|codespacerange)`)
	cmapHex   = regexp.MustCompile(`<([0-9A-Fa-f]+)>`)
)

func readToUnicode(font pdf.Value) (toUnicode, error) {
	m := toUnicode{base: font.Key("BaseFont").Name()}
	if font.Key("ToUnicode").IsNull() {
		return m, fmt.Errorf("pdftext: font %s has no ToUnicode map: its text cannot be read back", m.base)
	}
	rc := font.Key("ToUnicode").Reader()
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		return m, fmt.Errorf("pdftext: font %s's ToUnicode map: %w", m.base, err)
	}
	for _, block := range cmapBlock.FindAllStringSubmatch(string(raw), -1) {
		var codes []int
		for _, h := range cmapHex.FindAllStringSubmatch(block[2], -1) {
			v, err := hexInt(h[1])
			if err != nil {
				return m, err
			}
			codes = append(codes, v)
			if block[1] == "codespacerange" && m.width == 0 {
				m.width = len(h[1]) / 2
			}
		}
		switch block[1] {
		case "bfrange":
			for i := 0; i+2 < len(codes); i += 3 {
				m.ranges = append(m.ranges, codeRange{codes[i], codes[i+1], codes[i+2]})
			}
		case "bfchar":
			for i := 0; i+1 < len(codes); i += 2 {
				m.ranges = append(m.ranges, codeRange{codes[i], codes[i], codes[i+1]})
			}
		}
	}
	if m.width == 0 || len(m.ranges) == 0 {
		return m, fmt.Errorf("pdftext: font %s: its ToUnicode map declares no codes", m.base)
	}
	return m, nil
}

func (m toUnicode) decode(raw string) (string, error) {
	if m.width == 0 {
		return "", errors.New("pdftext: text shown before any font is selected")
	}
	if len(raw)%m.width != 0 {
		return "", fmt.Errorf("pdftext: font %s: %d bytes of text are not whole %d-byte codes", m.base, len(raw), m.width)
	}
	var out strings.Builder
	for i := 0; i < len(raw); i += m.width {
		code := 0
		for _, c := range []byte(raw[i : i+m.width]) {
			code = code<<8 | int(c)
		}
		r := rune(0xFFFD)
		for _, rg := range m.ranges {
			if rg.lo <= code && code <= rg.hi {
				r = rune(rg.dst + code - rg.lo)
				break
			}
		}
		out.WriteRune(r)
	}
	return out.String(), nil
}

func hexInt(h string) (int, error) {
	b, err := hex.DecodeString(h)
	if err != nil {
		return 0, fmt.Errorf("pdftext: %q in a ToUnicode map: %w", h, err)
	}
	v := 0
	for _, c := range b {
		v = v<<8 | int(c)
	}
	return v, nil
}
