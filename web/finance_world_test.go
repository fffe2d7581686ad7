package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/demo/history"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/web"
)

// financeWorld is a platform with real data: the demo's past traffic (services/demo/history),
// routed, recorded by the gateway and metered by the meter at its past times, with purchases
// and a refund through the Stripe webhook, over the last 60 days. The history starts on the
// 2nd of the month before last at the latest, so the month before last holds part of a month
// and last month a whole one.
type financeWorld struct {
	*env
	last, before invoicing.Period // last month and the one before
	finance      string           // the demo finance user's id
	// The demo's customers and providers, by account.
	acme, brightline, juniper string
	fjord, northwind          string
}

func newFinanceWorld(t *testing.T) *financeWorld {
	t.Helper()
	// Finance's review is tested at the platform's own minimum payout ($10): the demo's providers then carry their
	// months over, and a statement that pays nothing is there to review.
	w := &financeWorld{env: setupWith(t, func(cfg *web.Config, pool *pgxpool.Pool) {
		cfg.Invoicing = invoicing.New(invoicing.Config{Pool: pool, Ledger: ledger.NewLedger(pool, nil), Audit: cfg.Audit,
			Seller: testSeller})
	})}
	ctx := context.Background()
	if _, err := history.Seed(ctx, history.Config{Pool: w.pool}, time.Now()); err != nil {
		t.Fatal(err)
	}
	w.last = invoicing.PeriodOf(time.Now()).Prev()
	w.before = w.last.Prev()
	for _, a := range []struct {
		email string
		into  *string
	}{{"finance@example.com", &w.finance}, {"developer@example.com", &w.acme}, {"studio@example.com", &w.brightline},
		{"tutor@example.com", &w.juniper}, {"provider@example.com", &w.fjord}, {"northwind@example.com", &w.northwind}} {
		u, err := w.accounts.UserByEmail(ctx, a.email)
		if err != nil {
			t.Fatal(err)
		}
		*a.into = u.AccountID
		if a.into == &w.finance {
			*a.into = u.ID
		}
	}
	return w
}

// closeBoth closes the month before last, then last month, as the demo finance user.
func (w *financeWorld) closeBoth(t *testing.T) {
	t.Helper()
	for _, p := range []invoicing.Period{w.before, w.last} {
		pr, err := w.invoicing.Close(context.Background(), invoicing.CloseInput{Period: p, By: w.finance})
		if err != nil || pr.Status != invoicing.CloseDone {
			t.Fatalf("close %s: %+v, %v", p, pr, err)
		}
	}
}

// invoiceOf is the account's invoice for the period that is not void.
func (w *financeWorld) invoiceOf(t *testing.T, account string, p invoicing.Period) invoicing.Invoice {
	t.Helper()
	page, err := w.invoicing.Invoices(context.Background(), invoicing.InvoiceFilter{Period: p, AccountID: account})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Invoices {
		if s.Status != invoicing.StatusVoid {
			inv, err := w.invoicing.Invoice(context.Background(), s.ID)
			if err != nil {
				t.Fatal(err)
			}
			return inv
		}
	}
	t.Fatalf("no invoice of %s for %s", account, p)
	return invoicing.Invoice{}
}

// statementOf is the provider's statement for the period that is not void.
func (w *financeWorld) statementOf(t *testing.T, provider string, p invoicing.Period) invoicing.Statement {
	t.Helper()
	page, err := w.invoicing.Statements(context.Background(), invoicing.StatementFilter{Period: p, ProviderAccountID: provider})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Statements {
		if s.Status != invoicing.StatusVoid {
			st, err := w.invoicing.Statement(context.Background(), s.ID)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	t.Fatalf("no statement of %s for %s", provider, p)
	return invoicing.Statement{}
}

// approve approves invoices as the demo finance user and returns their numbers.
func (w *financeWorld) approve(t *testing.T, ids ...string) []string {
	t.Helper()
	res, err := w.invoicing.ApproveInvoices(context.Background(), w.finance, ids)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []string
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("approve %s: %v", r.ID, r.Err)
		}
		numbers = append(numbers, r.Number)
	}
	return numbers
}

// approveStatement approves a statement as the demo finance user.
func (w *financeWorld) approveStatement(t *testing.T, id string) string {
	t.Helper()
	res, err := w.invoicing.ApproveStatements(context.Background(), w.finance, []string{id})
	if err != nil || res[0].Err != nil {
		t.Fatalf("approve statement %s: %v %v", id, err, res)
	}
	return res[0].Number
}

// fetch gets a URL with a client and returns the response with its body read.
func fetch(t *testing.T, client *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	res, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// text is the selection's text with its runs of white space as single spaces.
func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }
