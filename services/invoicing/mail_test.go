package invoicing

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/documents/pdftext"
	"github.com/gpumarket/gpumarket/services/mail"
	"github.com/gpumarket/gpumarket/services/mail/catcher"
)

// An invoice approved is e-mailed once to the customer with its PDF, which reads as the invoice;
// a draft is not, nor is an invoice approved again.
func TestIssuedInvoiceIsEmailedWithItsPDF(t *testing.T) {
	var outbox *mail.Outbox
	w := newWorld(t, func(c *Config) {
		var err error
		if outbox, err = mail.NewOutbox(c.Pool, mail.OutboxConfig{From: "GPU Market <billing@gpumarket.test>", Now: c.Now}); err != nil {
			t.Fatal(err)
		}
		c.Outbox, c.Recipients = outbox, accounts.AccountEmails
	})
	c, err := catcher.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	smtp, err := mail.ParseSMTPURL(c.SMTPURL())
	if err != nil {
		t.Fatal(err)
	}
	sender, err := mail.NewSender(mail.SenderConfig{Pool: w.pool, SMTP: smtp, From: "GPU Market <billing@gpumarket.test>", Now: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		t.Helper()
		if _, err := sender.SendDue(w.ctx()); err != nil {
			t.Fatal(err)
		}
	}

	customer := w.account("Lisboa Labs")
	w.user(customer, "billing@lisboa.example", "developer")
	w.buy(customer, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), 50_00)
	w.use(request{customer: customer, rig: w.rig(w.account("Fjord GPU Co-op")), at: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC), in: 2_000_000, out: 500_000})
	w.at(time.Date(2026, 4, 4, 0, 0, 0, 0, time.UTC))
	w.close(march)
	draft := w.invoiceOf(customer, march)
	send()
	if n := len(c.Messages()); n != 0 {
		t.Fatalf("%d e-mails before the invoice is issued, want none", n)
	}

	res, err := w.svc.ApproveInvoices(w.ctx(), w.finance, []string{draft.ID})
	if err != nil || res[0].Err != nil {
		t.Fatalf("approve: %v %v", err, res[0].Err)
	}
	if again, _ := w.svc.ApproveInvoices(w.ctx(), w.finance, []string{draft.ID}); again[0].Err == nil {
		t.Fatal("the invoice was approved twice")
	}
	send()
	issued := w.mustInvoice(draft.ID)
	got, n, err := c.Find(func(p catcher.Parsed) bool { return strings.Contains(p.Subject, issued.Number) })
	if err != nil || n != 1 {
		t.Fatalf("%d e-mails of invoice %s (%v), want one", n, issued.Number, err)
	}
	if len(c.Messages()) != 1 {
		t.Errorf("%d e-mails in all, want one", len(c.Messages()))
	}
	if len(got.To) != 1 || got.To[0] != "billing@lisboa.example" {
		t.Errorf("sent to %v, want the customer's address", got.To)
	}
	if !strings.Contains(got.Text, "Total: "+issued.Total.String()) {
		t.Errorf("the text does not give the total %s:\n%s", issued.Total, got.Text)
	}
	if len(got.Attachments) != 1 || got.Attachments[0].Name != issued.Number+".pdf" || got.Attachments[0].ContentType != "application/pdf" {
		t.Fatalf("attachments %+v, want the invoice's PDF", got.Attachments)
	}
	runs, err := pdftext.Runs(got.Attachments[0].Data)
	if err != nil {
		t.Fatalf("the attached PDF does not parse: %v", err)
	}
	var text strings.Builder
	for _, r := range runs {
		text.WriteString(r.Text + " ")
	}
	for _, want := range []string{issued.Number, issued.Total.String(), "Lisboa Labs"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the PDF does not show %q", want)
		}
	}
	if issued.Total <= 0 {
		t.Errorf("the invoice's total is %s: the test wants one that bills something", issued.Total)
	}
}
