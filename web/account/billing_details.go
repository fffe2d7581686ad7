package account

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// Billing details: the caller's account's, for its invoices (a customer) or its statements (a
// provider), beside the platform's own, which configuration sets (see docs/invoicing.md,
// "Customers and providers").

var billingFields = []string{"legal_name", "address", "country", "vat_id", "po_number"}

func (s *Server) billingDetailsPage(c echo.Context) error {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	d, err := inv.BillingDetails(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	form := templates.Form{Values: map[string]string{"legal_name": d.LegalName, "address": d.Address, "country": d.Country,
		"vat_id": d.VATID, "po_number": d.PONumber}}
	return s.renderBillingDetails(c, http.StatusOK, d, form)
}

func (s *Server) renderBillingDetails(c echo.Context, status int, d invoicing.BillingDetails, form templates.Form) error {
	sess, _ := core.CurrentSession(c)
	p := templates.BillingDetailsPage{Page: s.Page(c, "Billing details"), Form: form, Set: d.Set,
		Provider: sess.User.Role == accounts.RoleProvider, Seller: sellerView(s.invoicing.Seller())}
	if d.Set {
		p.Updated = core.Moment(c, d.UpdatedAt)
	}
	return s.Render(c, status, templates.BillingDetails(p))
}

func sellerView(p invoicing.Party) templates.PartyView {
	v := templates.PartyView{Name: p.LegalName, VATID: p.VATID, Country: p.Country}
	if p.Address != "" {
		v.Address = strings.Split(p.Address, "\n")
	}
	if p.CountryName != "" {
		v.Country = p.CountryName + " (" + p.Country + ")"
	}
	return v
}

// billingDetailsSubmit saves the form; a field the service refuses is shown beside it with
// everything as it was typed, and nothing is saved.
func (s *Server) billingDetailsSubmit(c echo.Context) error {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return err
	}
	in := invoicing.BillingDetailsInput{LegalName: c.FormValue("legal_name"), Address: c.FormValue("address"),
		Country: c.FormValue("country"), VATID: c.FormValue("vat_id"), PONumber: c.FormValue("po_number")}
	_, err = s.setBillingDetails(c, inv, in)
	if services.ErrorCode(err) == services.CodeInvalid {
		sess, _ := core.CurrentSession(c)
		d, derr := inv.BillingDetails(c.Request().Context(), sess.User.AccountID)
		if derr != nil {
			return derr
		}
		_, body := s.Describe(err)
		return s.renderBillingDetails(c, http.StatusUnprocessableEntity, d,
			templates.Form{Values: core.Submitted(c, billingFields...), Errors: body.Fields, Error: body.Message})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/billing?flash=billing-saved")
}

// setBillingDetails saves the caller's billing details. A provider's carry no PO number: its
// statements print none, so one given is refused rather than kept unseen.
func (s *Server) setBillingDetails(c echo.Context, inv *invoicing.Service, in invoicing.BillingDetailsInput) (invoicing.BillingDetails, error) {
	sess, _ := core.CurrentSession(c)
	if sess.User.Role == accounts.RoleProvider && strings.TrimSpace(in.PONumber) != "" {
		return invoicing.BillingDetails{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"po_number": "Statements carry no PO number: leave it empty."}}
	}
	return inv.SetBillingDetails(c.Request().Context(), sess.User.AccountID, sess.User.ID, in)
}

// billingDetailsJSON is the caller's billing details and the platform's, as documents name them.
type billingDetailsJSON struct {
	BillingDetails invoicing.BillingDetails `json:"billing_details"`
	Seller         invoicing.Party          `json:"seller"`
}

func (s *Server) apiBillingDetails(c echo.Context) error {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	d, err := inv.BillingDetails(c.Request().Context(), sess.User.AccountID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, billingDetailsJSON{BillingDetails: d, Seller: inv.Seller()})
}

// apiSetBillingDetails replaces the caller's billing details with the body's: every field, as
// PUT does (a field left out is cleared, and the service says which are required).
func (s *Server) apiSetBillingDetails(c echo.Context) error {
	inv, err := core.InvoicingService(s.invoicing)
	if err != nil {
		return err
	}
	var in invoicing.BillingDetailsInput
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	d, err := s.setBillingDetails(c, inv, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, billingDetailsJSON{BillingDetails: d, Seller: inv.Seller()})
}
