package invoicing

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/documents"
)

// Party is one side of a document: the customer as buyer, the platform as seller, the provider
// as payee.
type Party struct {
	LegalName   string `json:"legal_name"`
	Address     string `json:"address"` // lines separated by "\n"
	Country     string `json:"country"` // ISO 3166-1 alpha-2
	CountryName string `json:"country_name"`
	VATID       string `json:"vat_id,omitempty"`
}

func (p Party) withCountryName() Party {
	p.CountryName, _ = CountryName(p.Country)
	return p
}

// Complete reports whether the party has a name, an address and a country: what a document
// must name its seller with.
func (p Party) Complete() bool {
	return p.LegalName != "" && p.Address != "" && p.Country != ""
}

// BillingDetails are a customer's details for its invoices.
type BillingDetails struct {
	AccountID string    `json:"account_id"`
	Party               // legal name, address, country, VAT ID
	PONumber  string    `json:"po_number,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Set is false when the customer has given none: documents then name the account.
	Set bool `json:"set"`
}

// BillingDetailsInput is what a customer sets.
type BillingDetailsInput struct {
	LegalName string `json:"legal_name"`
	Address   string `json:"address"`
	Country   string `json:"country"`
	VATID     string `json:"vat_id"`
	PONumber  string `json:"po_number"`
}

// Limits of billing details.
const (
	MaxLegalName = 200
	MaxAddress   = 500
	MaxPONumber  = 64
)

var vatChars = regexp.MustCompile(`^[A-Z0-9]+$`)

// Normalize trims the input, writes the country and VAT ID in capitals and the VAT ID without
// spaces, dots or dashes, and writes every line break of the address as "\n".
func (in BillingDetailsInput) Normalize() BillingDetailsInput {
	in.LegalName = strings.TrimSpace(in.LegalName)
	lines := strings.Split(strings.ReplaceAll(strings.ReplaceAll(in.Address, "\r\n", "\n"), "\r", "\n"), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	in.Address = strings.Join(kept, "\n")
	in.Country = strings.ToUpper(strings.TrimSpace(in.Country))
	in.VATID = strings.ToUpper(strings.NewReplacer(" ", "", ".", "", "-", "").Replace(strings.TrimSpace(in.VATID)))
	in.PONumber = strings.TrimSpace(in.PONumber)
	return in
}

// Validate checks normalized input and names every bad field with what to do.
func (in BillingDetailsInput) Validate() error {
	fe := services.FieldErrors{}
	switch n := utf8.RuneCountInString(in.LegalName); {
	case n == 0:
		fe.Add("legal_name", "Enter the legal name your invoices are made out to.")
	case n > MaxLegalName || hasControl(in.LegalName, false):
		fe.Add("legal_name", fmt.Sprintf("Use at most %d characters on one line.", MaxLegalName))
	}
	switch n := utf8.RuneCountInString(in.Address); {
	case n == 0:
		fe.Add("address", "Enter the postal address, one line per line of the address.")
	case n > MaxAddress || hasControl(in.Address, true):
		fe.Add("address", fmt.Sprintf("Use at most %d characters.", MaxAddress))
	}
	name, ok := CountryName(in.Country)
	if !ok {
		fe.Add("country", "Choose the country by its two-letter code, like IE or US.")
	}
	if problem := vatProblem(in.VATID, in.Country, name, ok); problem != "" {
		fe.Add("vat_id", problem)
	}
	if utf8.RuneCountInString(in.PONumber) > MaxPONumber || hasControl(in.PONumber, false) {
		fe.Add("po_number", fmt.Sprintf("Use at most %d characters on one line.", MaxPONumber))
	}
	for field, text := range map[string]string{"legal_name": in.LegalName, "address": in.Address, "po_number": in.PONumber} {
		if problem := unprintable(text); problem != "" {
			fe.Add(field, problem) // after any other problem with the field, which Add keeps
		}
	}
	return fe.Err()
}

// unprintable says which characters of text the documents cannot print, or "": text that goes
// on an invoice is refused as it is entered rather than when the invoice is printed (see
// docs/documents.md, "The font"). Line breaks, where a field allows them, print as lines.
func unprintable(text string) string {
	if err := documents.Printable(strings.ReplaceAll(text, "\n", "")); err != nil {
		return "Documents cannot print " + strings.TrimPrefix(err.Error(), "the document's font cannot print ") +
			": write it in Latin, Greek or Cyrillic letters."
	}
	return ""
}

// vatProblem says what is wrong with a VAT ID for the country, or "". An EU VAT ID is its
// member state's prefix (EL for Greece) and 2 to 12 letters and digits; a UK one GB and 9 or
// 12 digits (or GBGD, GBHA and 3 digits); any other is 4 to 20 letters and digits. Empty is
// fine: not every buyer has one.
func vatProblem(vat, country, countryName string, countryKnown bool) string {
	if vat == "" {
		return ""
	}
	if len(vat) > 20 || !vatChars.MatchString(vat) {
		return "Use letters and digits only, like IE1234567FA."
	}
	if !countryKnown {
		return ""
	}
	if prefix, eu := vatPrefixes[country]; eu {
		rest, ok := strings.CutPrefix(vat, prefix)
		if !ok || len(rest) < 2 || len(rest) > 12 {
			return fmt.Sprintf("A VAT ID of %s starts with %s and has 2 to 12 letters and digits after it.", countryName, prefix)
		}
		return ""
	}
	if country == "GB" {
		rest, ok := strings.CutPrefix(vat, "GB")
		digits := strings.Trim(rest, "0123456789") == ""
		if !ok || !(digits && (len(rest) == 9 || len(rest) == 12) ||
			(strings.HasPrefix(rest, "GD") || strings.HasPrefix(rest, "HA")) && len(rest) == 5) {
			return "A UK VAT ID is GB and 9 or 12 digits, like GB123456789."
		}
		return ""
	}
	if len(vat) < 4 {
		return "That is too short for a VAT or tax ID."
	}
	return ""
}

// hasControl reports whether s holds a control character (a line break, where lines is true,
// is allowed).
func hasControl(s string, lines bool) bool {
	for _, r := range s {
		if unicode.IsControl(r) && !(lines && r == '\n') {
			return true
		}
	}
	return false
}

// ValidateSeller checks the platform's details from configuration, as a customer's are checked.
func ValidateSeller(p Party) error {
	in := BillingDetailsInput{LegalName: p.LegalName, Address: p.Address, Country: p.Country, VATID: p.VATID}
	if err := in.Validate(); err != nil {
		var e *services.Error
		if errors.As(err, &e) {
			parts := make([]string, 0, len(e.Fields))
			for field, problem := range e.Fields {
				parts = append(parts, field+": "+problem)
			}
			return fmt.Errorf("the seller's details: %s", strings.Join(parts, "; "))
		}
		return err
	}
	return nil
}

// BillingDetails returns the account's billing details. An account that has given none gets
// its name as legal name and Set false.
func (s *Service) BillingDetails(ctx context.Context, accountID string) (_ BillingDetails, err error) {
	defer services.Wrap(&err, "invoicing.BillingDetails")
	if !isUUID(accountID) {
		return BillingDetails{}, services.Errorf(services.CodeNotFound, "No such account.")
	}
	d, err := s.billingDetailsWith(ctx, s.pool, accountID)
	if err != nil {
		return BillingDetails{}, err
	}
	if d.AccountID == "" {
		return BillingDetails{}, services.Errorf(services.CodeNotFound, "No such account.")
	}
	d.UpdatedAt = d.UpdatedAt.UTC()
	return d, nil
}

// SetBillingDetails sets the account's billing details, by the user byUserID of that account.
// Invalid input is an invalid error naming each field; nothing is stored then. Drafts show the
// new details at once; issued invoices keep the ones they were issued with.
func (s *Service) SetBillingDetails(ctx context.Context, accountID, byUserID string, in BillingDetailsInput) (_ BillingDetails, err error) {
	defer services.Wrap(&err, "invoicing.SetBillingDetails")
	in = in.Normalize()
	if err := in.Validate(); err != nil {
		return BillingDetails{}, err
	}
	if !isUUID(accountID) || (byUserID != "" && !isUUID(byUserID)) {
		return BillingDetails{}, services.Errorf(services.CodeNotFound, "No such account.")
	}
	// The change names its author when the author is one of the account's users.
	found, ofAccount, err := accounts.AccountAndUser(ctx, s.pool, accountID, byUserID)
	if err != nil {
		return BillingDetails{}, err
	}
	if !found {
		return BillingDetails{}, services.Errorf(services.CodeNotFound, "No such account.")
	}
	by := pgtype.Text{String: byUserID, Valid: ofAccount}
	if _, err := s.pool.Exec(ctx, `
		INSERT INTO billing_details (account_id, legal_name, address, country, vat_id, po_number, updated_by, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7::uuid, $8)
		ON CONFLICT (account_id) DO UPDATE SET legal_name = EXCLUDED.legal_name, address = EXCLUDED.address,
			country = EXCLUDED.country, vat_id = EXCLUDED.vat_id, po_number = EXCLUDED.po_number,
			updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at`,
		accountID, in.LegalName, in.Address, in.Country, in.VATID, in.PONumber, by, s.now().UTC()); err != nil {
		return BillingDetails{}, err
	}
	return s.BillingDetails(ctx, accountID)
}

// isUUID reports whether s is a uuid as PostgreSQL writes it.
// uuidsOf is the ids that are UUIDs, each once: a query by them never fails on one that is not.
func uuidsOf(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if isUUID(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
