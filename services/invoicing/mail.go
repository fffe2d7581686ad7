package invoicing

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/documents"
	"github.com/gpumarket/gpumarket/services/mail"
)

// Outbox queues e-mail in the caller's transaction (mail.Outbox).
type Outbox interface {
	Enqueue(ctx context.Context, tx pgx.Tx, m mail.Message) error
}

// Recipients are the addresses an account's e-mail goes to, read in the caller's transaction
// (accounts.AccountEmails).
type Recipients func(ctx context.Context, tx pgx.Tx, accountID string) ([]string, error)

// mailInvoice queues the e-mail of an invoice just issued in tx, with its PDF: the customer's
// copy, rendered from the invoice as tx sees it, so that the e-mail exists exactly when the
// invoice is issued (docs/email.md, "Invoices"). Its key is the invoice's id.
func (s *Service) mailInvoice(ctx context.Context, tx pgx.Tx, id, accountID string) error {
	if s.cfg.Outbox == nil || s.cfg.Recipients == nil {
		return nil
	}
	inv, err := s.invoice(ctx, tx, id, accountID, false)
	if err != nil {
		return err
	}
	inv = inv.forCustomer()
	doc, err := InvoiceDocument(inv)
	if err != nil {
		return err
	}
	var pdf bytes.Buffer
	if err := documents.PDF(&pdf, doc); err != nil {
		return wrapf(err, "invoicing: the PDF of invoice %s", inv.Number)
	}
	to, err := s.cfg.Recipients(ctx, tx, accountID)
	if err != nil || len(to) == 0 {
		return err
	}
	seller := s.cfg.Seller.LegalName
	if seller == "" {
		seller = "GPU Market"
	}
	return s.cfg.Outbox.Enqueue(ctx, tx, mail.Message{
		Key:     "invoice:" + id,
		To:      to,
		Subject: fmt.Sprintf("Invoice %s from %s for %s", inv.Number, seller, inv.Period),
		Text: fmt.Sprintf("Your invoice %s for %s is attached.\n\nTotal: %s\nAmount due: %s\n\n"+
			"Your prepaid balance pays it; the amount due is what it did not cover. The invoice is also on your "+
			"Invoices page when you log in.\n", inv.Number, inv.Period, inv.Total, inv.AmountDue),
		Attachments: []mail.Attachment{{Name: documents.FileName(doc) + ".pdf", ContentType: "application/pdf", Data: pdf.Bytes()}},
	})
}
