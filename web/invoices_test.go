package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/demo/history"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/payouts"
)

// lastMonth is the demo platform once its past traffic is metered and last month is closed
// by finance: every demo customer and provider has a draft.
type lastMonth struct {
	period  invoicing.Period
	finance accounts.User
	// accounts by the email of their demo user
	account map[string]string
}

// closeLastMonth meters the demo's past traffic (services/demo/history, through the meter as
// live traffic is) and closes last month as the finance user.
func (e *env) closeLastMonth(t *testing.T) lastMonth {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, err := history.Seed(ctx, history.Config{Pool: e.pool}, now); err != nil {
		t.Fatal(err)
	}
	m := lastMonth{period: invoicing.PeriodOf(now).Prev(), account: map[string]string{}}
	for _, email := range []string{"developer@example.com", "studio@example.com", "tutor@example.com", "provider@example.com",
		"northwind@example.com", "finance@example.com"} {
		u, err := e.accounts.UserByEmail(ctx, email)
		if err != nil {
			t.Fatal(err)
		}
		m.account[email] = u.AccountID
		if email == "finance@example.com" {
			m.finance = u
		}
	}
	if _, err := e.invoicing.Close(ctx, invoicing.CloseInput{Period: m.period, By: m.finance.ID}); err != nil {
		t.Fatal(err)
	}
	return m
}

// invoiceOf is the account's invoice of the month that is not void, as finance reads it.
func (e *env) invoiceOf(t *testing.T, m lastMonth, email string) invoicing.Invoice {
	t.Helper()
	page, err := e.invoicing.Invoices(context.Background(), invoicing.InvoiceFilter{Period: m.period, AccountID: m.account[email]})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Invoices {
		if v.Status != invoicing.StatusVoid {
			inv, err := e.invoicing.Invoice(context.Background(), v.ID)
			if err != nil {
				t.Fatal(err)
			}
			return inv
		}
	}
	t.Fatalf("%s has no invoice for %s", email, m.period)
	return invoicing.Invoice{}
}

// statementOf is the provider's statement of the month that is not void, as finance reads it.
func (e *env) statementOf(t *testing.T, m lastMonth, email string) invoicing.Statement {
	t.Helper()
	page, err := e.invoicing.Statements(context.Background(), invoicing.StatementFilter{Period: m.period,
		ProviderAccountID: m.account[email]})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range page.Statements {
		if v.Status != invoicing.StatusVoid {
			st, err := e.invoicing.Statement(context.Background(), v.ID)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	t.Fatalf("%s has no statement for %s", email, m.period)
	return invoicing.Statement{}
}

// approveInvoices approves invoices as finance and fails the test on any refusal.
func (e *env) approveInvoices(t *testing.T, m lastMonth, ids ...string) {
	t.Helper()
	res, err := e.invoicing.ApproveInvoices(context.Background(), m.finance.ID, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("approve invoice %s: %v", r.ID, r.Err)
		}
	}
}

// customerInvoiceJSON is GET /api/invoices/{id} with the fields these tests read.
type customerInvoiceJSON struct {
	ID         string   `json:"id"`
	AccountID  string   `json:"account_id"`
	Status     string   `json:"status"`
	Number     string   `json:"number"`
	Period     string   `json:"period"`
	TotalCents int64    `json:"total_cents"`
	AmountDue  int64    `json:"amount_due_cents"`
	Actions    []string `json:"actions"`
	Flags      []string `json:"flags"`
	IssuedBy   string   `json:"issued_by"`
	PONumber   string   `json:"po_number"`
	Lines      []struct {
		Kind        string `json:"kind"`
		Tier        string `json:"tier"`
		Model       string `json:"model"`
		AmountCents int64  `json:"amount_cents"`
	} `json:"lines"`
	Buyer  partyJSON `json:"buyer"`
	Seller partyJSON `json:"seller"`
	Links  linksJSON `json:"links"`
}

type partyJSON struct {
	LegalName   string `json:"legal_name"`
	Address     string `json:"address"`
	Country     string `json:"country"`
	CountryName string `json:"country_name"`
	VATID       string `json:"vat_id"`
}

type linksJSON struct {
	Page string `json:"page"`
	PDF  string `json:"pdf"`
	CSV  string `json:"csv"`
}

// customerInvoicesJSON is GET /api/invoices.
type customerInvoicesJSON struct {
	Invoices []struct {
		ID         string    `json:"id"`
		Number     string    `json:"number"`
		Status     string    `json:"status"`
		Period     string    `json:"period"`
		TotalCents int64     `json:"total_cents"`
		Actions    []string  `json:"actions"`
		Links      linksJSON `json:"links"`
	} `json:"invoices"`
	CreditNotes []struct {
		ID            string    `json:"id"`
		Number        string    `json:"number"`
		InvoiceID     string    `json:"invoice_id"`
		InvoiceNumber string    `json:"invoice_number"`
		AmountCents   int64     `json:"amount_cents"`
		Links         linksJSON `json:"links"`
	} `json:"credit_notes"`
	Count int `json:"count"`
}

// documentRow is a row of the Invoices page.
type documentRow struct {
	kind, id, status, number, href, period, total, due, pdf, csv string
}

func documentRows(doc *goquery.Document) []documentRow {
	var rows []documentRow
	doc.Find(`[data-testid="invoices"] tbody tr`).Each(func(_ int, s *goquery.Selection) {
		link := s.Find(testID("document-link"))
		rows = append(rows, documentRow{kind: s.AttrOr("data-testid", ""), id: s.AttrOr("data-id", ""),
			status: s.AttrOr("data-status", ""), number: strings.TrimSpace(link.Text()), href: link.AttrOr("href", ""),
			period: strings.TrimSpace(s.Find(testID("document-period")).Text()),
			total:  strings.TrimSpace(s.Find(testID("document-total")).Text()),
			due:    strings.TrimSpace(s.Find(testID("document-due")).Text()),
			pdf:    s.Find(testID("document-pdf")).AttrOr("href", ""), csv: s.Find(testID("document-csv")).AttrOr("href", "")})
	})
	return rows
}

// cents writes an amount as the pages do.
func cents(c invoicing.Cents) string {
	if c < 0 {
		return "-" + cents(-c)
	}
	return "$" + c.Decimal()
}

// A customer finds its issued invoices and credit notes, newest first, with their numbers,
// totals and the addresses of their page, PDF and CSV, on the page and in the JSON; another
// customer's invoice and its own drafts do not exist for it. The JSON of an invoice holds its
// lines, whose amounts add up to its total, and no action: a customer takes none.
func TestCustomerFindsItsInvoicesAndCreditNotes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.closeLastMonth(t)
	acme, brightline := e.invoiceOf(t, m, "developer@example.com"), e.invoiceOf(t, m, "studio@example.com")
	b, _ := loginBrowser(t, e, "developer@example.com")
	token := e.token(t, "developer@example.com", demo.Password)

	// Before finance approves anything: nothing to show, the drafts are finance's.
	if doc := getPage(t, b, e.srv.URL+"/invoices"); doc.Find(testID("no-invoices")).Length() != 1 || len(documentRows(doc)) != 0 {
		t.Fatalf("the Invoices page before approval shows %d rows", len(documentRows(doc)))
	}
	var draft apiErrorJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices/"+acme.ID, nil, &draft), http.StatusNotFound)
	if draft.Error.Code != "not_found" {
		t.Fatalf("a customer's draft: %+v", draft)
	}

	e.approveInvoices(t, m, acme.ID, brightline.ID)
	acme, brightline = e.invoiceOf(t, m, "developer@example.com"), e.invoiceOf(t, m, "studio@example.com")
	doc := getPage(t, b, e.srv.URL+"/invoices")
	rows := documentRows(doc)
	want := documentRow{kind: "invoice", id: acme.ID, status: "issued", number: acme.Number, href: "/invoices/" + acme.ID,
		period: m.period.Label(), total: cents(acme.Total), due: cents(acme.AmountDue), pdf: "/invoices/" + acme.ID + "/pdf",
		csv: "/invoices/" + acme.ID + "/csv"}
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("the Invoices page: %+v, want %+v", rows, want)
	}
	if acme.Total <= 0 || !strings.HasPrefix(acme.Number, "GPM-") {
		t.Fatalf("Acme's invoice: %s for %s", acme.Number, acme.Total)
	}
	if strings.Contains(doc.Text(), brightline.Number) {
		t.Fatal("the Invoices page shows another customer's invoice")
	}

	var list customerInvoicesJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices", nil, &list), http.StatusOK)
	if list.Count != 1 || len(list.Invoices) != 1 || list.Invoices[0].ID != acme.ID || list.Invoices[0].Number != acme.Number ||
		list.Invoices[0].TotalCents != int64(acme.Total) || list.Invoices[0].Status != "issued" ||
		list.Invoices[0].Period != m.period.String() || list.Invoices[0].Actions == nil || len(list.Invoices[0].Actions) != 0 ||
		list.Invoices[0].Links != (linksJSON{Page: want.href, PDF: want.pdf, CSV: want.csv}) || list.CreditNotes == nil ||
		len(list.CreditNotes) != 0 {
		t.Fatalf("GET /api/invoices = %+v", list)
	}

	var one customerInvoiceJSON
	res := e.call(t, token, http.MethodGet, "/api/invoices/"+acme.ID, nil, &one)
	wantStatus(t, res, http.StatusOK)
	var sum int64
	for _, l := range one.Lines {
		sum += l.AmountCents
	}
	if one.ID != acme.ID || one.Status != "issued" || one.Number != acme.Number || one.TotalCents != int64(acme.Total) ||
		sum != one.TotalCents || len(one.Lines) != len(acme.Lines) || one.Actions == nil || len(one.Actions) != 0 ||
		len(one.Flags) != 0 || one.IssuedBy != "" || one.Seller.LegalName != testSeller.LegalName || one.Buyer.LegalName != "Acme Labs" ||
		one.Links.Page != want.href {
		t.Fatalf("GET /api/invoices/{id} = %+v (lines sum to %d)", one, sum)
	}
	if len(acme.Actions) == 0 {
		t.Fatal("finance's view of the issued invoice offers no action: the customer's view proves nothing")
	}

	// Another customer's invoice, an id that is not one: not found, for the JSON and for the
	// PDF's address alike. The PDF's address of its own is its document's.
	for _, id := range []string{brightline.ID, "no-such-invoice", brightline.ID + ".pdf"} {
		var e404 apiErrorJSON
		wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices/"+id, nil, &e404), http.StatusNotFound)
		if e404.Error.Code != "not_found" {
			t.Errorf("GET /api/invoices/%s: %+v", id, e404)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/invoices/"+acme.ID+".pdf", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	pdf, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 5)
	_, _ = io.ReadFull(pdf.Body, head)
	pdf.Body.Close()
	if pdf.StatusCode != http.StatusOK || pdf.Header.Get("Content-Type") != "application/pdf" || string(head) != "%PDF-" {
		t.Fatalf("GET /api/invoices/{id}.pdf: %d %q, starting %q; want the invoice's PDF", pdf.StatusCode, pdf.Header.Get("Content-Type"), head)
	}
	other := e.token(t, "studio@example.com", demo.Password)
	wantStatus(t, e.call(t, other, http.MethodGet, "/api/invoices/"+acme.ID, nil, nil), http.StatusNotFound)

	// Finance voids Acme's invoice: the credit note cancels it, and the regenerated draft is not
	// the customer's until it is approved, which lists it first.
	voided, err := e.invoicing.VoidInvoice(ctx, invoicing.VoidInput{ID: acme.ID, By: m.finance.ID, Reason: invoicing.VoidWrongDetails})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices/"+voided.RegeneratedID, nil, nil), http.StatusNotFound)
	rows = documentRows(getPage(t, b, e.srv.URL+"/invoices"))
	if len(rows) != 2 || rows[0].kind != "credit_note" || rows[0].id != voided.CreditNoteID || rows[0].number != acme.Number+"-CN01" ||
		rows[0].total != cents(-acme.Total) || rows[0].href != "/credit-notes/"+voided.CreditNoteID ||
		rows[0].pdf != "/credit-notes/"+voided.CreditNoteID+"/pdf" || rows[0].csv != "/credit-notes/"+voided.CreditNoteID+"/csv" ||
		rows[1].id != acme.ID || rows[1].status != "void" {
		t.Fatalf("the Invoices page after the void: %+v", rows)
	}
	e.approveInvoices(t, m, voided.RegeneratedID)
	regenerated := e.invoiceOf(t, m, "developer@example.com")
	doc = getPage(t, b, e.srv.URL+"/invoices")
	rows = documentRows(doc)
	if len(rows) != 3 || rows[0].id != regenerated.ID || rows[0].number != regenerated.Number || rows[0].status != "issued" ||
		rows[0].total != cents(regenerated.Total) || rows[1].kind != "credit_note" || rows[2].id != acme.ID ||
		!strings.Contains(doc.Find(`[data-id="`+regenerated.ID+`"]`).Text(), "replaces "+acme.Number) {
		t.Fatalf("the Invoices page after the regenerated invoice is issued: %+v", rows)
	}
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices", nil, &list), http.StatusOK)
	if list.Count != 2 || list.Invoices[0].ID != regenerated.ID || len(list.CreditNotes) != 1 ||
		list.CreditNotes[0].InvoiceID != acme.ID || list.CreditNotes[0].InvoiceNumber != acme.Number ||
		list.CreditNotes[0].AmountCents != int64(acme.Total) || list.CreditNotes[0].Links.Page != "/credit-notes/"+voided.CreditNoteID {
		t.Fatalf("GET /api/invoices after the void: %+v", list)
	}
}

// billingDetailsJSON is GET and PUT /api/settings/billing.
type billingDetailsJSON struct {
	BillingDetails struct {
		partyJSON
		PONumber string `json:"po_number"`
		Set      bool   `json:"set"`
	} `json:"billing_details"`
	Seller partyJSON `json:"seller"`
}

// The billing details form: each field the service refuses is shown beside it, with what was
// typed, and nothing is saved; saved details are shown normalized, beside the platform's own,
// which the page shows and cannot change. The next draft carries them, and so does the
// invoice issued from it.
func TestBillingDetailsFormShowsErrorsAndTheNextInvoiceCarriesThem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	b, csrf := loginBrowser(t, e, "developer@example.com")
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}

	doc := getPage(t, b, e.srv.URL+"/settings/billing")
	form := doc.Find(`form[action="/settings/billing"][method="post"]`)
	if form.Find(`input[name="_csrf"]`).AttrOr("value", "") == "" || form.Find(`input[name="legal_name"]`).AttrOr("value", "") != "Acme Labs" ||
		form.Find(`textarea[name="address"]`).Length() != 1 || form.Find(`input[name="po_number"]`).Length() != 1 ||
		doc.Find(testID("details-unset")).Length() != 1 {
		t.Fatalf("the billing details form before any is set: %q", form.Text())
	}
	seller := doc.Find(testID("seller"))
	if seller.Find(testID("seller-name")).Text() != testSeller.LegalName || seller.Find(testID("seller-vat")).Text() != testSeller.VATID ||
		seller.Find(testID("seller-country")).Text() != "Ireland (IE)" || !strings.Contains(seller.Text(), "Dublin D01 X2Y3") ||
		seller.Find("input, textarea, select").Length() != 0 {
		t.Fatalf("the seller's details: %q", seller.Text())
	}

	bad := url.Values{"_csrf": {csrf}, "legal_name": {"  "}, "address": {"2 Quay Street"}, "country": {"XX"},
		"vat_id": {"IE!!"}, "po_number": {strings.Repeat("7", 65)}}
	res, err := b.PostForm(e.srv.URL+"/settings/billing", bad)
	if err != nil {
		t.Fatal(err)
	}
	doc, err = goqueryFrom(res)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid form: status %d", res.StatusCode)
	}
	for _, f := range []string{"legal_name", "country", "vat_id", "po_number"} {
		if doc.Find(testID("error-"+f)).Text() == "" {
			t.Errorf("no error beside %s", f)
		}
	}
	if doc.Find(testID("error-address")).Length() != 0 || doc.Find(`textarea[name="address"]`).Text() != "2 Quay Street" ||
		doc.Find(`input[name="vat_id"]`).AttrOr("value", "") != "IE!!" || doc.Find(`input[name="country"]`).AttrOr("value", "") != "XX" {
		t.Fatalf("the form after errors does not keep what was typed: %q", doc.Find("form").Text())
	}
	if d, err := e.invoicing.BillingDetails(ctx, dev.AccountID); err != nil || d.Set {
		t.Fatalf("details stored from an invalid form: %+v, %v", d, err)
	}

	good := url.Values{"_csrf": {csrf}, "legal_name": {"Acme Labs Ltd"}, "address": {"2 Quay Street\r\nGalway"}, "country": {"ie"},
		"vat_id": {"ie 9876543-wa"}, "po_number": {"PO-7"}}
	res = postForm(t, b, e.srv.URL+"/settings/billing", good)
	wantStatus(t, res, http.StatusSeeOther)
	if loc := res.Header.Get("Location"); loc != "/settings/billing?flash=billing-saved" {
		t.Fatalf("after saving: %q", loc)
	}
	doc = getPage(t, b, e.srv.URL+"/settings/billing?flash=billing-saved")
	if doc.Find(`input[name="legal_name"]`).AttrOr("value", "") != "Acme Labs Ltd" ||
		doc.Find(`textarea[name="address"]`).Text() != "2 Quay Street\nGalway" || doc.Find(`input[name="country"]`).AttrOr("value", "") != "IE" ||
		doc.Find(`input[name="vat_id"]`).AttrOr("value", "") != "IE9876543WA" || doc.Find(`input[name="po_number"]`).AttrOr("value", "") != "PO-7" ||
		doc.Find(testID("details-updated")).Length() != 1 || !strings.Contains(doc.Find(testID("flash")).Text(), "saved") {
		t.Fatalf("the saved details: %q", doc.Find("form").Text())
	}

	m := e.closeLastMonth(t)
	draft := e.invoiceOf(t, m, "developer@example.com")
	if draft.Buyer.LegalName != "Acme Labs Ltd" || draft.Buyer.Address != "2 Quay Street\nGalway" || draft.Buyer.VATID != "IE9876543WA" ||
		draft.Buyer.CountryName != "Ireland" || draft.PONumber != "PO-7" {
		t.Fatalf("the next draft's buyer: %+v, PO %q", draft.Buyer, draft.PONumber)
	}
	e.approveInvoices(t, m, draft.ID)
	token := e.token(t, "developer@example.com", demo.Password)
	var one customerInvoiceJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/invoices/"+draft.ID, nil, &one), http.StatusOK)
	if one.Buyer.LegalName != "Acme Labs Ltd" || one.Buyer.VATID != "IE9876543WA" || one.Buyer.Country != "IE" || one.PONumber != "PO-7" ||
		one.Seller.LegalName != testSeller.LegalName || one.Seller.VATID != testSeller.VATID {
		t.Fatalf("the issued invoice's parties: buyer %+v, seller %+v, PO %q", one.Buyer, one.Seller, one.PONumber)
	}
}

// The billing details' JSON: the caller's own and the platform's; a PUT that the service
// refuses names each field and saves nothing; a provider sets its own, for its statements,
// without a PO number, and never another account's.
func TestAPIBillingDetails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dev := e.token(t, "developer@example.com", demo.Password)
	var out billingDetailsJSON
	wantStatus(t, e.call(t, dev, http.MethodGet, "/api/settings/billing", nil, &out), http.StatusOK)
	if out.BillingDetails.Set || out.BillingDetails.LegalName != "Acme Labs" || out.Seller.LegalName != testSeller.LegalName ||
		out.Seller.CountryName != "Ireland" {
		t.Fatalf("GET before any is set: %+v", out)
	}
	var refused apiErrorJSON
	wantStatus(t, e.call(t, dev, http.MethodPut, "/api/settings/billing", map[string]string{"legal_name": "Acme", "address": "",
		"country": "DE", "vat_id": "FR123"}, &refused), http.StatusUnprocessableEntity)
	if refused.Error.Code != "invalid" || refused.Error.Fields["address"] == "" || refused.Error.Fields["vat_id"] == "" ||
		refused.Error.Fields["legal_name"] != "" {
		t.Fatalf("an invalid PUT: %+v", refused)
	}
	wantStatus(t, e.call(t, dev, http.MethodPut, "/api/settings/billing", map[string]string{"legal_name": "Acme", "account_id": "x"},
		&refused), http.StatusUnprocessableEntity)
	if refused.Error.Fields["account_id"] == "" {
		t.Fatalf("a PUT naming an account: %+v", refused)
	}
	wantStatus(t, e.call(t, dev, http.MethodGet, "/api/settings/billing", nil, &out), http.StatusOK)
	if out.BillingDetails.Set {
		t.Fatalf("refused PUTs saved %+v", out.BillingDetails)
	}
	wantStatus(t, e.call(t, dev, http.MethodPut, "/api/settings/billing", map[string]string{"legal_name": "Acme Labs GmbH",
		"address": "Unter den Linden 1\n10117 Berlin", "country": "de", "vat_id": "DE 123456789", "po_number": "4500012345"}, &out),
		http.StatusOK)
	if !out.BillingDetails.Set || out.BillingDetails.Country != "DE" || out.BillingDetails.VATID != "DE123456789" ||
		out.BillingDetails.CountryName != "Germany" || out.BillingDetails.PONumber != "4500012345" {
		t.Fatalf("a valid PUT: %+v", out.BillingDetails)
	}

	prov := e.token(t, "provider@example.com", demo.Password)
	wantStatus(t, e.call(t, prov, http.MethodPut, "/api/settings/billing", map[string]string{"legal_name": "Fjord GPU Co-op SA",
		"address": "Storgata 1\n0155 Oslo", "country": "NO", "po_number": "PO-1"}, &refused), http.StatusUnprocessableEntity)
	if refused.Error.Fields["po_number"] == "" {
		t.Fatalf("a provider's PO number: %+v", refused)
	}
	wantStatus(t, e.call(t, prov, http.MethodPut, "/api/settings/billing", map[string]string{"legal_name": "Fjord GPU Co-op SA",
		"address": "Storgata 1\n0155 Oslo", "country": "NO", "vat_id": "NO923456789MVA"}, &out), http.StatusOK)
	if out.BillingDetails.LegalName != "Fjord GPU Co-op SA" || out.BillingDetails.CountryName != "Norway" {
		t.Fatalf("a provider's details: %+v", out.BillingDetails)
	}
	wantStatus(t, e.call(t, dev, http.MethodGet, "/api/settings/billing", nil, &out), http.StatusOK)
	if out.BillingDetails.LegalName != "Acme Labs GmbH" {
		t.Fatalf("the developer's details after the provider's PUT: %+v", out.BillingDetails)
	}
	b, _ := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, b, e.srv.URL+"/settings/billing")
	if doc.Find(`input[name="po_number"]`).Length() != 0 || doc.Find(`input[name="legal_name"]`).AttrOr("value", "") != "Fjord GPU Co-op SA" {
		t.Fatalf("the provider's form: %q", doc.Find("form").Text())
	}
}

// providerStatementsJSON is GET /api/provider/statements with the fields these tests read.
type providerStatementsJSON struct {
	Statements []struct {
		ID            string   `json:"id"`
		Number        string   `json:"number"`
		Status        string   `json:"status"`
		Period        string   `json:"period"`
		EarningsCents int64    `json:"earnings_cents"`
		CarriedIn     int64    `json:"carried_in_cents"`
		Clawbacks     int64    `json:"clawbacks_cents"`
		PayoutCents   int64    `json:"payout_cents"`
		CarriedOut    int64    `json:"carried_out_cents"`
		Actions       []string `json:"actions"`
		PayoutStatus  string   `json:"payout_status"`
		Payout        *struct {
			Status           string `json:"status"`
			AmountCents      int64  `json:"amount_cents"`
			StripeTransferID string `json:"stripe_transfer_id"`
			LastError        string `json:"last_error"`
		} `json:"payout"`
		Links linksJSON `json:"links"`
	} `json:"statements"`
	Count int `json:"count"`
}

// A provider sees its issued statements with what each earned, carried and paid out, and how
// its payout went: a provider with a connected account is paid on approval, one without sees
// its payout failed until finance retries it after onboarding. Its Payouts page links each
// payout to its statement. No provider sees another's.
func TestProviderSeesItsStatementsAndTheirPayouts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	m := e.closeLastMonth(t)
	fjordUser, err := e.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := e.payouts.Connect(ctx, payoutsConnect(e, fjordUser, "NO"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.payouts.Observe(ctx, stateComplete(a.StripeAccountID), time.Now()); err != nil {
		t.Fatal(err)
	}
	fjord, northwind := e.statementOf(t, m, "provider@example.com"), e.statementOf(t, m, "northwind@example.com")
	if fjord.Payout <= 0 || northwind.Payout <= 0 || fjord.Payout != fjord.Net {
		t.Fatalf("the demo's statements pay out %s of %s (Fjord) and %s of %s (Northwind): both should pay out what they net",
			fjord.Payout, fjord.Net, northwind.Payout, northwind.Net)
	}
	res, err := e.invoicing.ApproveStatements(ctx, m.finance.ID, []string{fjord.ID, northwind.ID})
	if err != nil || res[0].Err != nil || res[1].Err != nil || res[0].Payout == nil || res[0].Payout.Status != "paid" ||
		res[1].Payout == nil || res[1].Payout.Status != "failed" {
		t.Fatalf("approving the statements: %+v, %v", res, err)
	}
	fjord = e.statementOf(t, m, "provider@example.com")

	b, _ := loginBrowser(t, e, "provider@example.com")
	doc := getPage(t, b, e.srv.URL+"/provider/statements")
	row := doc.Find(`[data-testid="statement"][data-id="` + fjord.ID + `"]`)
	link := row.Find(testID("statement-link"))
	if doc.Find(testID("statement")).Length() != 1 || row.AttrOr("data-status", "") != "paid" ||
		row.AttrOr("data-payout-status", "") != "paid" || link.Text() != fjord.Number || link.AttrOr("href", "") != "/statements/"+fjord.ID ||
		row.Find(testID("statement-pdf")).AttrOr("href", "") != "/statements/"+fjord.ID+"/pdf" ||
		row.Find(testID("statement-earnings")).Text() != cents(fjord.Earnings+fjord.LateEarnings) ||
		row.Find(testID("statement-payout")).Text() != cents(fjord.Payout) ||
		row.Find(testID("statement-carried-in")).Text() != cents(fjord.CarriedIn) ||
		!strings.Contains(row.Find(testID("statement-payout-status")).Text(), res[0].Payout.StripeTransferID) {
		t.Fatalf("Fjord's statements page: %q", row.Text())
	}
	if strings.Contains(doc.Text(), northwind.ID) || strings.Contains(doc.Text(), res[1].Number) {
		t.Fatal("Fjord sees Northwind's statement")
	}
	doc = getPage(t, b, e.srv.URL+"/provider/payouts")
	if l := doc.Find(testID("payout-statement")); l.Length() != 1 || l.AttrOr("href", "") != "/statements/"+fjord.ID || l.Text() != fjord.Number {
		t.Fatalf("the payouts page's statement link: %q to %q", l.Text(), l.AttrOr("href", ""))
	}

	token := e.token(t, "provider@example.com", demo.Password)
	var list providerStatementsJSON
	wantStatus(t, e.call(t, token, http.MethodGet, "/api/provider/statements", nil, &list), http.StatusOK)
	if list.Count != 1 || list.Statements[0].ID != fjord.ID || list.Statements[0].PayoutStatus != "paid" ||
		list.Statements[0].Payout == nil || list.Statements[0].Payout.AmountCents != int64(fjord.Payout) ||
		list.Statements[0].PayoutCents != int64(fjord.Payout) || list.Statements[0].EarningsCents != int64(fjord.Earnings) ||
		list.Statements[0].Actions == nil || len(list.Statements[0].Actions) != 0 ||
		list.Statements[0].Links != (linksJSON{Page: "/statements/" + fjord.ID, PDF: "/statements/" + fjord.ID + "/pdf",
			CSV: "/statements/" + fjord.ID + "/csv"}) {
		t.Fatalf("GET /api/provider/statements = %+v", list)
	}

	nw := e.token(t, "northwind@example.com", demo.Password)
	wantStatus(t, e.call(t, nw, http.MethodGet, "/api/provider/statements", nil, &list), http.StatusOK)
	if list.Count != 1 || list.Statements[0].ID != northwind.ID || list.Statements[0].Status != "issued" ||
		list.Statements[0].PayoutStatus != "failed" || !strings.Contains(list.Statements[0].Payout.LastError, "no Stripe account") {
		t.Fatalf("Northwind's statements before onboarding: %+v", list)
	}

	// Northwind onboards; finance retries its payout from the payouts page: paid once, by them.
	nwUser, _ := e.accounts.UserByEmail(ctx, "northwind@example.com")
	na, _, err := e.payouts.Connect(ctx, payoutsConnect(e, nwUser, "US"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.payouts.Observe(ctx, stateComplete(na.StripeAccountID), time.Now()); err != nil {
		t.Fatal(err)
	}
	fin, csrf := loginBrowser(t, e, "finance@example.com")
	retry := confirmation(t, fin, e.srv.URL, askedToConfirm(t, fin, e.srv.URL+"/finance/payouts/"+res[1].Payout.ID+"/retry",
		url.Values{"_csrf": {csrf}}))
	wantStatus(t, retry, http.StatusSeeOther)
	if loc := retry.Header.Get("Location"); loc != "/finance/payouts?flash=payout-paid" {
		t.Fatalf("the retry: %q", loc)
	}
	wantStatus(t, e.call(t, nw, http.MethodGet, "/api/provider/statements", nil, &list), http.StatusOK)
	if list.Statements[0].Status != "paid" || list.Statements[0].PayoutStatus != "paid" ||
		!strings.HasPrefix(list.Statements[0].Payout.StripeTransferID, "tr_") {
		t.Fatalf("Northwind's statements after the retry: %+v", list)
	}
	if st := e.statementOf(t, m, "northwind@example.com"); st.PaidBy != "finance@example.com" ||
		st.PaymentReference != list.Statements[0].Payout.StripeTransferID {
		t.Fatalf("Northwind's statement paid by %q with %q", st.PaidBy, st.PaymentReference)
	}
	if n := countRows(t, e, `SELECT count(*) FROM ledger_transactions WHERE kind = 'payout'`); n != 2 {
		t.Fatalf("%d payouts posted, want 2", n)
	}
}

// payoutsConnect is the connect form's input for the provider user.
func payoutsConnect(e *env, u accounts.User, country string) payouts.ConnectInput {
	return payouts.ConnectInput{ProviderAccountID: u.AccountID, Email: u.Email, Country: country,
		RefreshURL: e.srv.URL + "/provider/payouts/onboarding", ReturnURL: e.srv.URL + "/provider/payouts/return"}
}

// stateComplete is a Stripe account that finished onboarding, as Stripe describes it.
func stateComplete(stripeAccountID string) payouts.AccountState {
	return payouts.AccountState{ID: stripeAccountID, DetailsSubmitted: true, PayoutsEnabled: true}
}
