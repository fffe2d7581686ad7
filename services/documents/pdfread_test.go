package documents

import (
	"bytes"
	"io"
	"testing"

	"github.com/ledongthuc/pdf"

	"github.com/gpumarket/gpumarket/services/documents/pdftext"
)

func openPDF(t testing.TB, b []byte) *pdf.Reader {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("the PDF does not open: %v", err)
	}
	return r
}

// pdfRuns reads back the text of every page, one run per text-showing operator
// (package pdftext).
func pdfRuns(t testing.TB, b []byte) []pdftext.Run {
	t.Helper()
	runs, err := pdftext.Runs(b)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// runTexts is the text of every run.
func runTexts(runs []pdftext.Run) map[string]bool { return pdftext.Texts(runs) }

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
