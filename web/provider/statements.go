package provider

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// A provider's own statements and the payout of each (see docs/payouts.md, "Pages and JSON").

// statementPayout is a statement's payout as its provider sees it.
type statementPayout struct {
	ID               string         `json:"id"`
	Status           payouts.Status `json:"status"`
	AmountCents      int64          `json:"amount_cents"`
	StripeTransferID string         `json:"stripe_transfer_id,omitempty"`
	PaidAt           *time.Time     `json:"paid_at,omitempty"`
	LastError        string         `json:"last_error,omitempty"`
}

// providerStatement is a statement in a provider's list, with its payout and where to read it.
type providerStatement struct {
	invoicing.StatementSummary
	// PayoutStatus is how the statement is paid: carried_over (it pays nothing out), awaiting
	// (its payout is not made yet), pending, paid or failed (its payout's), or void.
	PayoutStatus string `json:"payout_status"`
	// PayoutMade is the statement's payout once one is made, nil before.
	PayoutMade *statementPayout  `json:"payout"`
	Links      core.DocumentURLs `json:"links"`
}

// The statuses of a statement's payment that are not a payout's.
const (
	payoutCarriedOver = "carried_over"
	payoutAwaiting    = "awaiting"
	payoutVoid        = "void"
)

// providerStatements reads the caller's statements and their payouts.
func (s *Server) providerStatements(c echo.Context) ([]providerStatement, error) {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return nil, err
	}
	ctx, provider := c.Request().Context(), core.ProviderAccount(c)
	list, err := inv.ProviderStatements(ctx, provider)
	if err != nil {
		return nil, err
	}
	paid := map[string]payouts.Payout{}
	if po := s.Payments.Payouts; po != nil {
		made, err := po.List(ctx, payouts.ListFilter{ProviderAccountID: provider, Limit: payouts.MaxListed})
		if err != nil {
			return nil, err
		}
		for _, p := range made {
			paid[p.StatementID] = p
		}
	}
	out := make([]providerStatement, len(list))
	for i, st := range list {
		out[i] = providerStatement{StatementSummary: st, Links: core.StatementURLs(st.ID)}
		p, made := paid[st.ID]
		switch {
		case made:
			out[i].PayoutStatus = string(p.Status)
			out[i].PayoutMade = &statementPayout{ID: p.ID, Status: p.Status, AmountCents: p.AmountCents,
				StripeTransferID: p.StripeTransferID, PaidAt: p.PaidAt, LastError: p.LastError}
		case st.Payout <= 0:
			out[i].PayoutStatus = payoutCarriedOver
		case st.Status == invoicing.StatusPaid:
			out[i].PayoutStatus = string(payouts.StatusPaid) // recorded by hand: paid outside Stripe
		case st.Status == invoicing.StatusVoid:
			out[i].PayoutStatus = payoutVoid
		default:
			out[i].PayoutStatus = payoutAwaiting
		}
	}
	return out, nil
}

func (s *Server) providerStatementsPage(c echo.Context) error {
	list, err := s.providerStatements(c)
	if err != nil {
		return err
	}
	p := templates.ProviderStatementsPage{Page: s.Page(c, "Statements"), MinimumPayout: core.SignedCents(s.invoicing.MinimumPayout())}
	for _, st := range list {
		r := templates.ProviderStatementRow{ID: st.ID, Number: st.DisplayNumber, Period: st.Period.Label(), Status: string(st.Status),
			Earnings: core.SignedCents(st.Earnings + st.LateEarnings), CarriedIn: core.SignedCents(st.CarriedIn),
			Clawbacks: core.SignedCents(st.Clawbacks), Held: core.SignedCents(st.Held), Payout: core.SignedCents(st.Payout), CarriedOut: core.SignedCents(st.CarriedOut),
			PayoutStatus: st.PayoutStatus, PayoutText: payoutText(st), URL: st.Links.Page, PDFURL: st.Links.PDF}
		if made := st.PayoutMade; made != nil {
			r.Transfer, r.PayoutError = made.StripeTransferID, made.LastError
		}
		p.Statements = append(p.Statements, r)
	}
	return s.Render(c, http.StatusOK, templates.ProviderStatements(p))
}

// payoutText says in words how a statement is paid.
func payoutText(st providerStatement) string {
	switch st.PayoutStatus {
	case payoutCarriedOver:
		return "nothing to pay out: carried over"
	case payoutAwaiting:
		return "awaiting payout"
	case payoutVoid:
		return "void: not paid"
	case string(payouts.StatusPending):
		return "payout under way"
	case string(payouts.StatusFailed):
		return "payout failed; finance retries it"
	case string(payouts.StatusPaid):
		if st.PayoutMade == nil {
			return "paid"
		}
		return "paid " + core.DateOf(st.PayoutMade.PaidAt) + " by Stripe transfer"
	}
	return st.PayoutStatus
}

func (s *Server) apiProviderStatements(c echo.Context) error {
	list, err := s.providerStatements(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"statements": list, "count": len(list)})
}
