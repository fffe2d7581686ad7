package finance

import (
	"fmt"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The confirmations of finance's actions on documents (core.Confirmation): each says what the action
// does to money and what cannot be undone, with the amounts, and binds them.

// statementApproveButton is the approval's words for a statement: the transfer it sends, by
// amount and provider, or that it pays nothing now.
func statementApproveButton(st invoicing.Statement, paysOut bool) string {
	if st.Payout > 0 && paysOut {
		return fmt.Sprintf("Approve and pay %s to %s through Stripe", st.Payout, st.ProviderName)
	}
	return "Approve and issue (pays nothing now)"
}

// loadStatements reads the statements of an approval; an id of none is nil in its place.
func (s *Server) loadStatements(c echo.Context, ids []string) ([]*invoicing.Statement, error) {
	out := make([]*invoicing.Statement, len(ids))
	for i, id := range ids {
		st, err := s.invoicing.Statement(c.Request().Context(), id)
		if services.ErrorCode(err) == services.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = &st
	}
	return out, nil
}

func (s *Server) loadInvoices(c echo.Context, ids []string) ([]*invoicing.Invoice, error) {
	out := make([]*invoicing.Invoice, len(ids))
	for i, id := range ids {
		inv, err := s.invoicing.Invoice(c.Request().Context(), id)
		if services.ErrorCode(err) == services.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[i] = &inv
	}
	return out, nil
}

// statementApproval is the confirmation of approving the statements: each with its provider
// and the payout it sends, and their total. A statement that is not a draft, or no statement,
// is listed as not approved. action is where the confirmation posts, fields what it carries.
func statementApproval(sts []*invoicing.Statement, ids []string, paysOut bool, action, back string,
	fields []templates.HiddenField) core.Confirmation {
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{PartyLabel: "Provider", AmountLabel: "Payout", Action: action,
		Back: back, Hidden: fields}}
	conf.Binds = append(core.BindFields("approve statements", nil), strconv.FormatBool(paysOut))
	var total invoicing.Cents
	var drafts, paying int
	for i, st := range sts {
		if st == nil {
			conf.Items = append(conf.Items, templates.ConfirmItem{ID: ids[i], Label: "No such statement: not approved", Party: "—", Amount: "—"})
			conf.Binds = append(conf.Binds, ids[i]+":none")
			continue
		}
		it := templates.ConfirmItem{ID: st.ID, Label: st.DisplayNumber + ", " + st.Period.Label(), Party: st.ProviderName,
			Amount: st.Payout.String()}
		conf.Binds = append(conf.Binds, fmt.Sprintf("%s:%s:%d", st.ID, st.Status, st.Payout))
		if st.Status != invoicing.StatusDraft {
			it.Label += " (" + string(st.Status) + ": not approved again)"
			it.Amount = "—"
		} else {
			drafts++
			total += st.Payout
			if st.Payout > 0 {
				paying++
			}
		}
		conf.Items = append(conf.Items, it)
	}
	conf.Total = total.String()
	word := "statements"
	if drafts == 1 {
		word = "statement"
	}
	conf.Title = fmt.Sprintf("Approve %d %s", drafts, word)
	if drafts == 0 {
		conf.Title = "Nothing to approve"
		conf.Consequences = []string{"None of these is a draft: nothing can be approved, and nothing is paid."}
		return conf
	}
	conf.Consequences = []string{
		"Approving issues each draft below with its number: it can then only be voided, while unpaid, never edited."}
	switch {
	case paying > 0 && paysOut:
		conf.Consequences = append(conf.Consequences, fmt.Sprintf(
			"It then pays each payout at once by a Stripe transfer to the provider's connected Stripe account: %s in all, in %d %s. A transfer sent cannot be called back from here.",
			total, paying, plural(paying, "transfer", "transfers")))
	case paying > 0:
		conf.Consequences = append(conf.Consequences, fmt.Sprintf(
			"This server sends no payouts: %s is then owed to the providers, to be paid by hand and marked paid.", total))
	}
	if drafts > paying {
		conf.Consequences = append(conf.Consequences,
			"A statement with a payout of $0.00 pays nothing: its net is under the minimum payout, or negative, and is carried over to the provider's next statement.")
	}
	conf.Consequences = append(conf.Consequences,
		"Each payout is computed again as it is approved: if it is no longer the amount shown, that statement is neither approved nor paid, and is shown to you again.")
	conf.Button = fmt.Sprintf("Approve and issue %d %s", drafts, word)
	if paying > 0 && paysOut {
		conf.Button = fmt.Sprintf("Approve %d %s and pay %s through Stripe", drafts, word, total)
		if len(sts) == 1 {
			conf.Button = statementApproveButton(*sts[0], paysOut)
		}
	}
	return conf
}

// invoiceApproval is the confirmation of approving the invoices: each with its customer and
// total. Approval moves no money: the usage was charged to the prepaid balance as it was used.
func invoiceApproval(invs []*invoicing.Invoice, ids []string, action, back string, fields []templates.HiddenField) core.Confirmation {
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{PartyLabel: "Customer", AmountLabel: "Total", Action: action,
		Back: back, Hidden: fields}}
	conf.Binds = core.BindFields("approve invoices", nil)
	var total invoicing.Cents
	var drafts int
	for i, inv := range invs {
		if inv == nil {
			conf.Items = append(conf.Items, templates.ConfirmItem{ID: ids[i], Label: "No such invoice: not approved", Party: "—", Amount: "—"})
			conf.Binds = append(conf.Binds, ids[i]+":none")
			continue
		}
		it := templates.ConfirmItem{ID: inv.ID, Label: inv.DisplayNumber + ", " + inv.Period.Label(), Party: inv.AccountName,
			Amount: inv.Total.String()}
		conf.Binds = append(conf.Binds, fmt.Sprintf("%s:%s:%d", inv.ID, inv.Status, inv.Total))
		if inv.Status != invoicing.StatusDraft {
			it.Label += " (" + string(inv.Status) + ": not approved again)"
			it.Amount = "—"
		} else {
			drafts++
			total += inv.Total
		}
		conf.Items = append(conf.Items, it)
	}
	conf.Total = total.String()
	word := plural(drafts, "invoice", "invoices")
	conf.Title = fmt.Sprintf("Approve %d %s", drafts, word)
	if drafts == 0 {
		conf.Title = "Nothing to approve"
		conf.Consequences = []string{"None of these is a draft: nothing can be approved."}
		return conf
	}
	conf.Consequences = []string{
		"Approving issues each draft below to its customer with its number: it can then only be voided with a credit note, never edited.",
		"No money moves: the usage was charged to the customer's prepaid balance as it was used.",
		"Each total is computed again as it is approved: if it is no longer the amount shown, that invoice is not approved, and is shown to you again.",
	}
	conf.Button = fmt.Sprintf("Approve and issue %d %s", drafts, word)
	return conf
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// confirmedStatements are the drafts among sts at the payouts shown, for the service to
// approve only at those; the others go with no figure and are refused by it as they are.
func confirmedStatements(sts []*invoicing.Statement, ids []string) []invoicing.Confirmed {
	out := make([]invoicing.Confirmed, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if sts[i] != nil {
			out[i].Cents = sts[i].Payout
		}
	}
	return out
}

func confirmedInvoices(invs []*invoicing.Invoice, ids []string) []invoicing.Confirmed {
	out := make([]invoicing.Confirmed, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if invs[i] != nil {
			out[i].Cents = invs[i].Total
		}
	}
	return out
}

// voidConfirmation is the confirmation of voiding a document: it cannot be undone; what the
// credit note does to money, by reason.
func voidConfirmation(kind, number, party string, total invoicing.Cents, status invoicing.Status, reason invoicing.VoidReason,
	action, back string, fields []templates.HiddenField) core.Confirmation {
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Void " + kind + " " + number, Action: action, Back: back,
		Hidden: fields, Danger: true}}
	conf.Binds = append(core.BindFields("void "+kind, fields), fmt.Sprintf("%s:%d", status, total))
	conf.Consequences = []string{fmt.Sprintf("Voiding %s %s of %s (%s) cannot be undone: it keeps its number, is marked void, and a regenerated draft replaces it.",
		kind, number, party, total)}
	if kind == "invoice" {
		conf.Consequences[0] = fmt.Sprintf("Voiding invoice %s of %s (total %s) cannot be undone: it keeps its number, is marked void, a credit note cancels it, and a regenerated draft replaces it.",
			number, party, total)
		if reason == invoicing.VoidNotDelivered {
			conf.Consequences = append(conf.Consequences, fmt.Sprintf(
				"Money moves: the credit note puts %s back on %s's prepaid balance, takes each provider's share of it back from what they are owed (shown on their next statements), and the platform's revenue down by the rest.",
				total, party))
		} else {
			conf.Consequences = append(conf.Consequences, "No money moves: for this reason the credit note only replaces the document.")
		}
	} else {
		conf.Consequences = append(conf.Consequences, "No money moves: the statement has not paid out.")
	}
	if reason != "" {
		conf.Consequences = append(conf.Consequences, "Reason: "+reason.Text()+".")
	}
	conf.Button = "Void " + kind + " " + number
	return conf
}

// paidConfirmation is the confirmation of recording a document paid by hand.
func paidConfirmation(kind, number, party string, amount invoicing.Cents, status invoicing.Status, action, back string,
	fields []templates.HiddenField) core.Confirmation {
	conf := core.Confirmation{ConfirmPage: templates.ConfirmPage{Title: "Mark " + kind + " " + number + " paid", Action: action, Back: back,
		Hidden: fields}}
	conf.Binds = append(core.BindFields("paid "+kind, fields), fmt.Sprintf("%s:%d", status, amount))
	if kind == "invoice" {
		conf.Consequences = []string{
			fmt.Sprintf("This records that %s paid the %s due on invoice %s, outside Stripe. It cannot be undone; the invoice can afterwards only be voided.", party, amount, number),
			"It moves no money itself: money received outside Stripe is put on the balance with a finance adjustment.",
		}
	} else {
		conf.Consequences = []string{
			fmt.Sprintf("This records that %s was paid the %s payout of statement %s outside Stripe. It cannot be undone.", party, amount, number),
			"No Stripe transfer is sent for it, now or later: pay the provider yourself before you record it.",
		}
	}
	conf.Button = fmt.Sprintf("Mark %s paid: %s", number, amount)
	return conf
}
