package web_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"math/big"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/documents/pdftext"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// Each role sees only the documents it may: a developer its own account's invoices and
// credit notes that are not drafts, a provider its own statements that are not drafts,
// finance and admins every one. Any other is not found, on the page, the PDF, the CSV and the
// API's PDF alike; a role that has no such documents is refused.
func TestDocumentsAreScopedToWhoMaySeeThem(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	ctx := context.Background()
	acmeIssued := w.invoiceOf(t, w.acme, w.before)
	acmeVoided := w.invoiceOf(t, w.acme, w.last)
	brightIssued := w.invoiceOf(t, w.brightline, w.last)
	brightVoided := w.invoiceOf(t, w.brightline, w.before)
	w.approve(t, acmeIssued.ID, acmeVoided.ID, brightIssued.ID, brightVoided.ID)
	void := func(id string) invoicing.Voided {
		v, err := w.invoicing.VoidInvoice(ctx, invoicing.VoidInput{ID: id, By: w.finance, Reason: invoicing.VoidWrongDetails})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	acmeVoid, brightVoid := void(acmeVoided.ID), void(brightVoided.ID)
	fjordIssued := w.statementOf(t, w.fjord, w.before)
	northwindIssued := w.statementOf(t, w.northwind, w.before)
	w.approveStatement(t, fjordIssued.ID)
	w.approveStatement(t, northwindIssued.ID)
	fjordDraft := w.statementOf(t, w.fjord, w.last)

	developer, _ := loginBrowser(t, w.env, "developer@example.com")
	provider, _ := loginBrowser(t, w.env, "provider@example.com")
	finance, _ := loginBrowser(t, w.env, "finance@example.com")
	admin, _ := loginBrowser(t, w.env, "admin@example.com")
	devToken := w.token(t, "developer@example.com", demo.Password)

	forms := func(base string) []string { return []string{base, base + "/pdf", base + "/csv"} }
	for _, c := range []struct {
		name   string
		client *http.Client
		paths  []string
		want   int
	}{
		{"a developer's own issued invoice", developer, forms("/invoices/" + acmeIssued.ID), http.StatusOK},
		{"a developer's own voided invoice", developer, forms("/invoices/" + acmeVoided.ID), http.StatusOK},
		{"a developer's own credit note", developer, forms("/credit-notes/" + acmeVoid.CreditNoteID), http.StatusOK},
		{"another account's invoice", developer, forms("/invoices/" + brightIssued.ID), http.StatusNotFound},
		{"another account's credit note", developer, forms("/credit-notes/" + brightVoid.CreditNoteID), http.StatusNotFound},
		{"a developer's own draft", developer, forms("/invoices/" + acmeVoid.RegeneratedID), http.StatusNotFound},
		{"a statement, to a developer", developer, forms("/statements/" + fjordIssued.ID), http.StatusForbidden},
		{"a provider's own issued statement", provider, forms("/statements/" + fjordIssued.ID), http.StatusOK},
		{"another provider's statement", provider, forms("/statements/" + northwindIssued.ID), http.StatusNotFound},
		{"a provider's own draft", provider, forms("/statements/" + fjordDraft.ID), http.StatusNotFound},
		{"an invoice, to a provider", provider, forms("/invoices/" + acmeIssued.ID), http.StatusForbidden},
		{"a draft, to finance", finance, append(forms("/invoices/"+acmeVoid.RegeneratedID), forms("/statements/"+fjordDraft.ID)...), http.StatusOK},
		{"any account's, to finance", finance, append(forms("/invoices/"+brightIssued.ID), forms("/credit-notes/"+brightVoid.CreditNoteID)...), http.StatusOK},
		{"any, to an admin", admin, append(forms("/invoices/"+acmeVoid.RegeneratedID), forms("/statements/"+northwindIssued.ID)...), http.StatusOK},
		{"no such document", finance, forms("/invoices/00000000-0000-4000-8000-000000000009"), http.StatusNotFound},
		{"not an id", finance, forms("/statements/../../etc/passwd"), http.StatusNotFound},
	} {
		for _, p := range c.paths {
			res, body := fetch(t, c.client, w.srv.URL+p)
			if res.StatusCode != c.want {
				t.Errorf("%s: GET %s is %d, want %d", c.name, p, res.StatusCode, c.want)
			}
			if c.want == http.StatusNotFound && strings.Contains(p, "/invoices/") && !strings.HasSuffix(p, "passwd") &&
				!bytes.Contains(body, []byte("No such invoice.")) {
				t.Errorf("%s: GET %s does not say there is no such invoice", c.name, p)
			}
		}
	}
	for id, want := range map[string]int{acmeIssued.ID: http.StatusOK, brightIssued.ID: http.StatusNotFound, acmeVoid.RegeneratedID: http.StatusNotFound} {
		res := w.call(t, devToken, http.MethodGet, "/api/invoices/"+id+".pdf", nil, nil)
		if res.StatusCode != want {
			t.Errorf("GET /api/invoices/%s.pdf as the developer: %d, want %d", id, res.StatusCode, want)
		}
	}
}

// The PDF routes answer with the renderer's own bytes for the document, as application/pdf,
// to be saved under the document's number (a draft: DRAFT-<period>); the CSV route with the
// CSV of its lines; GET /api/invoices/<id>.pdf is the same PDF. The PDF's text holds the
// invoice's number and total.
func TestDocumentRoutesServeTheRenderersBytes(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	w.closeBoth(t)
	finance, _ := loginBrowser(t, w.env, "finance@example.com")
	inv := w.invoiceOf(t, w.acme, w.last)
	want := func(inv invoicing.Invoice) (documents.Document, []byte) {
		t.Helper()
		d, err := invoicing.InvoiceDocument(inv)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := documents.PDF(&b, d); err != nil {
			t.Fatal(err)
		}
		return d, b.Bytes()
	}
	checkPDF := func(path string, res *http.Response, body, wantBytes []byte, file string) {
		t.Helper()
		_, params, err := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/pdf" || err != nil ||
			params["filename"] != file || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") {
			t.Errorf("GET %s: %d %s, %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
		}
		if !bytes.Equal(body, wantBytes) {
			t.Errorf("GET %s: %d bytes that are not the renderer's %d for the document", path, len(body), len(wantBytes))
		}
	}
	_, draftPDF := want(inv)
	res, body := fetch(t, finance, w.srv.URL+"/invoices/"+inv.ID+"/pdf")
	checkPDF("the draft's PDF", res, body, draftPDF, "DRAFT-"+w.last.String()+".pdf")

	number := w.approve(t, inv.ID)[0]
	inv = w.invoiceOf(t, w.acme, w.last)
	doc, issuedPDF := want(inv)
	if bytes.Equal(draftPDF, issuedPDF) {
		t.Fatal("the draft and the issued invoice render the same")
	}
	for _, p := range []string{"/invoices/" + inv.ID + "/pdf"} {
		res, body := fetch(t, finance, w.srv.URL+p)
		checkPDF(p, res, body, issuedPDF, number+".pdf")
	}
	for _, p := range []string{"/api/invoices/" + inv.ID + ".pdf", "/api/invoices/" + inv.ID + "/pdf"} {
		for _, who := range []string{"finance@example.com", "developer@example.com"} {
			req, _ := http.NewRequest(http.MethodGet, w.srv.URL+p, nil)
			req.Header.Set("Authorization", "Bearer "+w.token(t, who, demo.Password))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := readBody(res)
			checkPDF(p+" as "+who, res, body, issuedPDF, number+".pdf")
		}
	}
	runs, err := pdftext.Runs(issuedPDF)
	if err != nil {
		t.Fatal(err)
	}
	texts := pdftext.Texts(runs)
	if !texts[number] || !texts["$"+groupedDollars(inv.Total)] {
		t.Errorf("the PDF's text lacks the number %s or the total %s", number, inv.Total)
	}

	res, body = fetch(t, finance, w.srv.URL+"/invoices/"+inv.ID+"/csv")
	var wantCSV bytes.Buffer
	if err := documents.LinesCSV(&wantCSV, doc); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	_, params, _ := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") || params["filename"] != number+".csv" ||
		!bytes.Equal(body, wantCSV.Bytes()) || err != nil || len(rows) != 1+len(doc.Lines) || rows[1][0] != number {
		t.Errorf("the CSV: %d %s %q, %d rows (%v)", res.StatusCode, res.Header.Get("Content-Type"), params["filename"], len(rows), err)
	}

	page := getPage(t, finance, w.srv.URL+"/invoices/"+inv.ID)
	if n := text(page.Find(`[data-testid="document-number"]`)); n != number {
		t.Errorf("the page's number %q", n)
	}
	for id, href := range map[string]string{"document-pdf": "/invoices/" + inv.ID + "/pdf", "document-csv": "/invoices/" + inv.ID + "/csv",
		"document-back": "/finance/invoices/" + inv.ID} {
		if got := page.Find(`[data-testid="`+id+`"]`).AttrOr("href", ""); got != href {
			t.Errorf("the page's %s links to %q, want %q", id, got, href)
		}
	}
	developer, _ := loginBrowser(t, w.env, "developer@example.com")
	if back := getPage(t, developer, w.srv.URL+"/invoices/"+inv.ID).Find(`[data-testid="document-back"]`).AttrOr("href", ""); back != "/invoices" {
		t.Errorf("the customer's page goes back to %q, want its invoices", back)
	}

	st := w.statementOf(t, w.fjord, w.last)
	sd, err := invoicing.StatementDocument(st)
	if err != nil {
		t.Fatal(err)
	}
	var stPDF bytes.Buffer
	if err := documents.PDF(&stPDF, sd); err != nil {
		t.Fatal(err)
	}
	res, body = fetch(t, finance, w.srv.URL+"/statements/"+st.ID+"/pdf")
	checkPDF("the statement's PDF", res, body, stPDF.Bytes(), "DRAFT-"+w.last.String()+".pdf")
}

// groupedDollars writes cents as the documents print them, "1,234.56".
func groupedDollars(c invoicing.Cents) string {
	d := c.Decimal()
	whole, frac, _ := strings.Cut(d, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String() + "." + frac
}

// The month's journal: every ledger posting of the month, each transaction's postings summing
// to zero and the month's too, exactly; as many rows as the ledger holds postings of the
// month. The queue links to it; a month that does not parse is named; a developer is refused.
func TestJournalCSVSumsToZero(t *testing.T) {
	t.Parallel()
	w := newFinanceWorld(t)
	finance, _ := loginBrowser(t, w.env, "finance@example.com")
	path := "/api/finance/journal.csv?period=" + w.last.String()
	res, body := fetch(t, finance, w.srv.URL+path)
	_, params, _ := mime.ParseMediaType(res.Header.Get("Content-Disposition"))
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/csv") ||
		params["filename"] != "gpumarket-journal-"+w.last.String()+".csv" {
		t.Fatalf("GET %s: %d %s %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Disposition"))
	}
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil || len(rows) < 2 || rows[0][1] != "transaction_id" || rows[0][9] != "amount_usd" {
		t.Fatalf("the journal: %d rows, %v", len(rows), err)
	}
	perTxn := map[string]*big.Rat{}
	total := new(big.Rat)
	for _, r := range rows[1:] {
		a, ok := new(big.Rat).SetString(r[9])
		if !ok {
			t.Fatalf("amount %q", r[9])
		}
		if perTxn[r[1]] == nil {
			perTxn[r[1]] = new(big.Rat)
		}
		perTxn[r[1]].Add(perTxn[r[1]], a)
		total.Add(total, a)
	}
	for id, sum := range perTxn {
		if sum.Sign() != 0 {
			t.Errorf("transaction %s sums to %s", id, sum.FloatString(12))
		}
	}
	if total.Sign() != 0 {
		t.Errorf("the month sums to %s", total.FloatString(12))
	}
	n := countRows(t, w.env, `SELECT count(*) FROM ledger_postings p JOIN ledger_transactions t ON t.id = p.transaction_id
		WHERE t.occurred_at >= $1 AND t.occurred_at < $2`, w.last.Start(), w.last.End())
	if len(rows)-1 != n || n == 0 || len(perTxn) < 2 {
		t.Errorf("%d postings in the journal (%d transactions), %d in the ledger for %s", len(rows)-1, len(perTxn), n, w.last)
	}

	doc := getPage(t, finance, w.srv.URL+"/finance/invoices?period="+w.before.String())
	if href := doc.Find(`[data-testid="journal-link"]`).AttrOr("href", ""); href != "/api/finance/journal.csv?period="+w.before.String() {
		t.Errorf("the queue's journal link %q", href)
	}
	doc = getPage(t, finance, w.srv.URL+"/finance/invoices")
	if href := doc.Find(`[data-testid="journal-link"]`).AttrOr("href", ""); href != path {
		t.Errorf("the unfiltered queue's journal link %q, want last month's", href)
	}
	var e apiErrorJSON
	token := w.token(t, "finance@example.com", demo.Password)
	if res := w.call(t, token, http.MethodGet, "/api/finance/journal.csv?period=March", nil, &e); res.StatusCode != http.StatusUnprocessableEntity ||
		e.Error.Fields["period"] == "" {
		t.Errorf("a month that does not parse: %d %+v", res.StatusCode, e)
	}
	if res := w.call(t, w.token(t, "developer@example.com", demo.Password), http.MethodGet, path, nil, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("the journal, to a developer: %d", res.StatusCode)
	}
}

func readBody(res *http.Response) ([]byte, error) {
	defer res.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(res.Body)
	return b.Bytes(), err
}
