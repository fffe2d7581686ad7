package payouts

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/stripe/stripe-go/v76"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// MaxPayoutCents is the most one payout carries: what one ledger posting can hold
// ($92,233,720.36). A statement owing more is refused rather than split.
const MaxPayoutCents = int64(math.MaxInt64 / int64(money.PicoPerCent))

var (
	statementIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	periodPattern      = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)
	uuidPattern        = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	countryPattern     = regexp.MustCompile(`^[A-Z]{2}$`)
)

// statementInput is a Statement read once, so that every check and write sees the same values.
type statementInput struct {
	ID, ProviderAccountID, Period, Number string
	AmountCents                           int64
}

// readStatement reads and checks a statement to pay. A statement that owes nothing is
// refused here, before any row is written: there is nothing to pay, not a payout that failed.
func readStatement(st Statement) (statementInput, error) {
	if st == nil {
		return statementInput{}, services.Errorf(services.CodeInvalid, "No statement to pay.")
	}
	in := statementInput{ID: st.StatementID(), ProviderAccountID: st.PayeeAccountID(), Period: st.StatementPeriod(),
		Number: strings.TrimSpace(st.StatementNumber()), AmountCents: st.PayableCents()}
	fe := services.FieldErrors{}
	if !statementIDPattern.MatchString(in.ID) {
		fe.Add("statement_id", "A statement id is 1 to 100 letters, digits, '-' or '_'.")
	}
	if !uuidPattern.MatchString(in.ProviderAccountID) {
		fe.Add("provider_account_id", "Not an account id.")
	}
	if !periodPattern.MatchString(in.Period) {
		fe.Add("period", "A period is a month, YYYY-MM.")
	}
	if in.Number == "" || utf8.RuneCountInString(in.Number) > 64 {
		fe.Add("number", "A statement is paid once it has its number (at most 64 characters).")
	}
	switch {
	case in.AmountCents <= 0:
		fe.Add("amount_cents", fmt.Sprintf("The statement owes the provider %s: there is nothing to pay.", centsText(in.AmountCents)))
	case in.AmountCents > MaxPayoutCents:
		fe.Add("amount_cents", fmt.Sprintf("One payout carries at most %s.", centsText(MaxPayoutCents)))
	}
	return in, fe.Err()
}

// covers reports whether the provider's payable balance, less what is reserved by its other
// payouts on their way (pending, or in doubt), holds the amount. Everything is exact: the
// balance and the reserve are BigPicos of any size.
func covers(balance, reserved money.BigPico, amount money.Pico) bool {
	return balance.Add(reserved.Neg()).Cmp(money.BigPicoOf(amount)) >= 0
}

// outcomeOf reads a failed Stripe call: whether the transfer may nonetheless exist (Stripe
// gave no answer, an error of its own, or said a request with the key is still running), and
// the reason to keep. A 4xx other than 409 is Stripe refusing the request: nothing was
// transferred, and Stripe keeps no result under the key for it.
func outcomeOf(err error) (inDoubt bool, reason string) {
	var se *stripe.Error
	if errors.As(err, &se) && se.HTTPStatusCode != 0 {
		detail := se.Msg
		if se.Code != "" {
			detail += " (" + string(se.Code) + ")"
		}
		switch {
		case se.HTTPStatusCode == http.StatusConflict || se.HTTPStatusCode >= 500:
			return true, clip(fmt.Sprintf("Stripe could not finish the request (%d): %s. A transfer may have been made; a retry finds it and never pays twice.",
				se.HTTPStatusCode, detail))
		default:
			return false, clip(fmt.Sprintf("Stripe refused the transfer (%d): %s. Nothing was paid.", se.HTTPStatusCode, detail))
		}
	}
	return true, clip(fmt.Sprintf("No answer from Stripe (%v). A transfer may have been made; a retry finds it and never pays twice.", err))
}

// clip keeps a stored reason within its column's 1000 characters, on a rune boundary.
func clip(s string) string {
	const max = 1000
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// centsText writes cents as dollars: "$12.34", "-$0.05".
func centsText(cents int64) string { return money.FormatCents(cents) }

// centsToPico is an amount in cents as a ledger amount; readStatement bounds it so that it
// never overflows.
func centsToPico(cents int64) money.Pico { return money.Pico(cents) * money.PicoPerCent }
