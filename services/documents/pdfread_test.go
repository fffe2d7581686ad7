package documents

import (
	"bytes"
	"encoding/hex"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/ledongthuc/pdf"
)

// pdfRun is one piece of text a PDF shows with one operator: what one cell of the layout
// holds.
type pdfRun struct {
	Page int
	Font string // the font's base name
	Text string
}

func openPDF(t testing.TB, b []byte) *pdf.Reader {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("the PDF does not open: %v", err)
	}
	return r
}

// pdfRuns reads back the text of every page, one run per text-showing operator, decoding
// each run's character codes through its font's ToUnicode map as the PDF declares it.
// (The reader's own decoding is not used: it adds a range's offset to the last byte only,
// which is right for the ranges the PDF specification allows, and fpdf declares a single
// range over all 65,536 two-byte codes.)
func pdfRuns(t testing.TB, b []byte) []pdfRun {
	t.Helper()
	r := openPDF(t, b)
	var runs []pdfRun
	for n := 1; n <= r.NumPage(); n++ {
		page := r.Page(n)
		res := page.Resources().Key("Font")
		fonts := map[string]toUnicode{}
		for _, key := range res.Keys() {
			fonts[key] = readToUnicode(t, res.Key(key))
		}
		var font toUnicode
		pdf.Interpret(page.V.Key("Contents"), func(stk *pdf.Stack, op string) {
			args := make([]pdf.Value, stk.Len())
			for i := len(args) - 1; i >= 0; i-- {
				args[i] = stk.Pop()
			}
			switch op {
			case "Tf":
				var ok bool
				if font, ok = fonts[args[0].Name()]; !ok {
					t.Fatalf("page %d selects font %s, which it does not have", n, args[0].Name())
				}
			case "Tj":
				runs = append(runs, pdfRun{Page: n, Font: font.base, Text: font.decode(t, args[0].RawString())})
			case "TJ":
				var s strings.Builder
				for i := 0; i < args[0].Len(); i++ {
					if v := args[0].Index(i); v.Kind() == pdf.String {
						s.WriteString(v.RawString())
					}
				}
				runs = append(runs, pdfRun{Page: n, Font: font.base, Text: font.decode(t, s.String())})
			}
		})
	}
	return runs
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

func readToUnicode(t testing.TB, font pdf.Value) toUnicode {
	t.Helper()
	m := toUnicode{base: font.Key("BaseFont").Name()}
	if font.Key("ToUnicode").IsNull() {
		t.Fatalf("font %s has no ToUnicode map: its text cannot be read back", m.base)
	}
	cmap := string(readStream(t, font.Key("ToUnicode")))
	for _, block := range cmapBlock.FindAllStringSubmatch(cmap, -1) {
		var codes []string
		for _, h := range cmapHex.FindAllStringSubmatch(block[2], -1) {
			codes = append(codes, h[1])
		}
		switch block[1] {
		case "codespacerange":
			m.width = len(codes[0]) / 2
		case "bfrange":
			for i := 0; i+2 < len(codes); i += 3 {
				m.ranges = append(m.ranges, codeRange{hexInt(t, codes[i]), hexInt(t, codes[i+1]), hexInt(t, codes[i+2])})
			}
		case "bfchar":
			for i := 0; i+1 < len(codes); i += 2 {
				c := hexInt(t, codes[i])
				m.ranges = append(m.ranges, codeRange{c, c, hexInt(t, codes[i+1])})
			}
		}
	}
	if m.width == 0 || len(m.ranges) == 0 {
		t.Fatalf("font %s: its ToUnicode map declares no codes", m.base)
	}
	return m
}

func (m toUnicode) decode(t testing.TB, raw string) string {
	t.Helper()
	if len(raw)%m.width != 0 {
		t.Fatalf("font %s: %d bytes of text are not whole %d-byte codes", m.base, len(raw), m.width)
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
	return out.String()
}

func hexInt(t testing.TB, h string) int {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	v := 0
	for _, c := range b {
		v = v<<8 | int(c)
	}
	return v
}

// runTexts is the text of every run.
func runTexts(runs []pdfRun) map[string]bool {
	out := map[string]bool{}
	for _, r := range runs {
		out[r.Text] = true
	}
	return out
}

func readStream(t testing.TB, v pdf.Value) []byte {
	t.Helper()
	rc := v.Reader()
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading a stream of the PDF: %v", err)
	}
	return b
}
