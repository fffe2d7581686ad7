package invoicing

import (
	"slices"
	"strings"

	"github.com/gpumarket/gpumarket/services"
)

// Status is where a document stands: a draft that finance reviews, issued with its number,
// paid, or void (cancelled by a credit note, replaced by a regenerated draft).
type Status string

// The statuses of invoices and statements.
const (
	StatusDraft  Status = "draft"
	StatusIssued Status = "issued"
	StatusPaid   Status = "paid"
	StatusVoid   Status = "void"
)

// Statuses lists them in the order a document passes through them.
var Statuses = []Status{StatusDraft, StatusIssued, StatusPaid, StatusVoid}

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Action is what finance may do to a document. Each document lists the actions its state
// allows (Invoice.Actions, Statement.Actions), and the service refuses any other.
type Action string

// The actions on documents.
const (
	// ActionApprove finalises a draft: recomputed, numbered and issued with the buyer's and
	// seller's details of the moment.
	ActionApprove Action = "approve"
	// ActionVoid cancels an issued document: an invoice with a credit note and a regenerated
	// draft, a statement with a regenerated draft.
	ActionVoid Action = "void"
	// ActionMarkPaid records the payment of an issued document with something to pay: an
	// invoice's amount due, a statement's payout.
	ActionMarkPaid Action = "mark_paid"
)

// invoiceActions are what an invoice in this state allows: a draft is approved; an issued
// invoice is voided, or marked paid when something is due; a paid one may still be voided (a
// credit note corrects it); a void one allows nothing.
func invoiceActions(s Status, due Cents) []Action {
	switch s {
	case StatusDraft:
		return []Action{ActionApprove}
	case StatusIssued:
		if due > 0 {
			return []Action{ActionMarkPaid, ActionVoid}
		}
		return []Action{ActionVoid}
	case StatusPaid:
		return []Action{ActionVoid}
	}
	return []Action{}
}

// statementActions are what a statement in this state allows: a draft is approved; an issued
// statement is marked paid when it pays out, and voided while no later statement of its
// provider is issued (that one carried on from it); a paid or void one allows nothing: a
// payout is corrected on a later statement. While the statement's payout is under way (an
// attempt holds it, or a transfer may exist) neither is allowed: money may be leaving for it
// (see docs/invoicing.md, "Paying statements").
func statementActions(s Status, payout Cents, laterIssued, payoutUnderway bool) []Action {
	switch s {
	case StatusDraft:
		return []Action{ActionApprove}
	case StatusIssued:
		a := []Action{}
		if payoutUnderway {
			return a
		}
		if payout > 0 {
			a = append(a, ActionMarkPaid)
		}
		if !laterIssued {
			a = append(a, ActionVoid)
		}
		return a
	}
	return []Action{}
}

// notAllowed is the error for an action the document's state does not allow.
func notAllowed(kind, number string, s Status, a Action, allowed []Action) error {
	names := make([]string, len(allowed))
	for i, x := range allowed {
		names[i] = strings.ReplaceAll(string(x), "_", " ")
	}
	what := "nothing more can be done to it"
	if len(names) > 0 {
		what = "it can be: " + strings.Join(names, ", ")
	}
	return services.Errorf(services.CodeConflict, "The %s %s is %s: %s, not %s.", kind, displayNumber(number), s, what,
		strings.ReplaceAll(string(a), "_", " "))
}

// VoidReason says why a document is voided. The list is fixed; each reason says whether the
// credit note moves money (see docs/invoicing.md, "Void and credit notes").
type VoidReason string

// The reasons for voiding.
const (
	// VoidNotDelivered: the service invoiced was not delivered. The credit note puts the
	// invoice's total back on the customer's prepaid credit and takes the providers' share
	// back from their payables; the regenerated invoice shows the credit.
	VoidNotDelivered VoidReason = "not_delivered"
	// VoidWrongDetails: the buyer's details, the seller's or the PO number were wrong. No
	// money moves; the regenerated invoice replaces the document.
	VoidWrongDetails VoidReason = "wrong_details"
	// VoidOther: another reason, said in the note. No money moves.
	VoidOther VoidReason = "other"
)

// InvoiceVoidReasons and StatementVoidReasons are the reasons each kind of document takes.
var (
	InvoiceVoidReasons   = []VoidReason{VoidNotDelivered, VoidWrongDetails, VoidOther}
	StatementVoidReasons = []VoidReason{VoidWrongDetails, VoidOther}
)

// MovesMoney reports whether a credit note for the reason credits the customer.
func (r VoidReason) MovesMoney() bool { return r == VoidNotDelivered }

// Text is the reason in words, for documents.
func (r VoidReason) Text() string {
	switch r {
	case VoidNotDelivered:
		return "Service not delivered"
	case VoidWrongDetails:
		return "Wrong billing details"
	case VoidOther:
		return "Other"
	}
	return string(r)
}

// LineKind is what a line of a document is.
type LineKind string

// The kinds of lines.
const (
	LineUsage     LineKind = "usage"      // usage of the document's period
	LineLateUsage LineKind = "late_usage" // usage of the earlier period, metered after its document was issued
	LineCredit    LineKind = "credit"     // an invoice's credit by a credit note for its period
	LineClawback  LineKind = "clawback"   // a statement's payable taken back by a credit note
	// LineHeld takes out of a statement the earnings of its period's requests flagged with
	// an excess (the rig reported more than was billed) that finance has not released.
	LineHeld LineKind = "held"
	// LineReleased pays on a statement the held earnings finance released in its period.
	LineReleased LineKind = "released"
)

// Flag marks a draft for finance's review queue.
type Flag string

// The flags.
const (
	// FlagUsageMismatch: the invoice's usage differs from the usage rows it sums (checked
	// exactly against usage_events for a sample of accounts at each close), or a line's amount
	// is not its tokens at its unit prices.
	FlagUsageMismatch Flag = "usage_mismatch"
	// FlagDiscrepancy: a request of the period is flagged with an excess above zero (its rig
	// reported more tokens than the meter billed) and finance has not resolved it. A flagged
	// request whose report did not exceed its bill (excess 0/0, billed within its bounds) puts
	// no money at stake and raises no flag on a document.
	FlagDiscrepancy Flag = "discrepancy"
	// FlagNegativeBalance: the customer's credit is below zero at the period's end, or the
	// provider's statement nets below zero.
	FlagNegativeBalance Flag = "negative_balance"
	// FlagSpike: the total is more than three times the previous period's.
	FlagSpike Flag = "spike"
)

// Flags lists every flag.
var Flags = []Flag{FlagUsageMismatch, FlagDiscrepancy, FlagNegativeBalance, FlagSpike}

// Valid reports whether f is a known flag.
func (f Flag) Valid() bool { return slices.Contains(Flags, f) }

// spikeFactor is how many times the previous period's total makes a spike.
const spikeFactor = 3

// NotAllowed is the refusal of the action a on a document in state s that allows only
// allowed, as the service itself words it: for a page that refuses before asking to confirm.
func NotAllowed(kind, number string, s Status, a Action, allowed []Action) error {
	return notAllowed(kind, number, s, a, allowed)
}
