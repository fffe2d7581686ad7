package home

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/templates"
)

// countText writes a count read with a limit: "12", or "500+" when the limit was reached.
func countText(n int, more bool) string {
	if more {
		return strconv.Itoa(n) + "+"
	}
	return strconv.Itoa(n)
}

func task(id, one, many, link string, n int, more bool) templates.HomeTask {
	return templates.HomeTask{ID: id, Label: countedLabel(int64(n), more, one, many), Link: link, Count: countText(n, more), Waiting: n > 0}
}

// countedLabel is the noun after a count, agreeing with it ("1 rig offline", "2 rigs offline").
func countedLabel(n int64, more bool, one, many string) string {
	if n == 1 && !more {
		return one
	}
	return many
}

// maxFlags is how many open flags the home counts before it writes "500+".
const maxFlags = 500

// financeHome is the platform finance's work waiting, each a count linking to its page, and
// last month's close (see docs/home.md, "Finance").
func (s *Server) financeHome(ctx context.Context, now time.Time, loc *time.Location) (*templates.FinanceHome, error) {
	h := &templates.FinanceHome{}
	month := invoicing.PeriodOf(now).Prev()
	h.ClosePeriod = month.Label()
	if inv := s.cfg.Invoicing; inv != nil {
		invs, err := inv.Invoices(ctx, invoicing.InvoiceFilter{Status: invoicing.StatusDraft, Limit: invoicing.MaxListLimit})
		if err != nil {
			return nil, err
		}
		sts, err := inv.Statements(ctx, invoicing.StatementFilter{Status: invoicing.StatusDraft, Limit: invoicing.MaxListLimit})
		if err != nil {
			return nil, err
		}
		flags, err := inv.FlaggedRequests(ctx, invoicing.FlagFilter{Unresolved: true, Limit: maxFlags})
		if err != nil {
			return nil, err
		}
		h.Tasks = append(h.Tasks,
			task("draft-invoices", "draft invoice to review", "draft invoices to review", "/finance/invoices?status=draft", len(invs.Invoices), invs.More),
			task("draft-statements", "draft statement to review", "draft statements to review", "/finance/statements?status=draft", len(sts.Statements), sts.More),
			task("open-flags", "flagged request to resolve", "flagged requests to resolve", "/finance/flags", len(flags), len(flags) >= maxFlags))
		if err := s.closeState(ctx, inv, month, now, loc, h); err != nil {
			return nil, err
		}
	} else {
		h.CloseState = "not available on this server"
	}
	if po := s.Payments.Payouts; po != nil {
		failed, err := po.List(ctx, payouts.ListFilter{Status: payouts.StatusFailed, Limit: payouts.MaxListed})
		if err != nil {
			return nil, err
		}
		h.Tasks = append(h.Tasks, task("failed-payouts", "failed payout to retry", "failed payouts to retry", "/finance/payouts?status=failed",
			len(failed), len(failed) >= payouts.MaxListed))
	}
	return h, nil
}

// closeState says where the close of month stands: not yet closed (and when it closes by
// itself), running, done or failed.
func (s *Server) closeState(ctx context.Context, inv *invoicing.Service, month invoicing.Period, now time.Time, loc *time.Location, h *templates.FinanceHome) error {
	pr, err := inv.CloseProgressOf(ctx, month)
	if services.ErrorCode(err) == services.CodeNotFound {
		h.CloseState = "not closed yet"
		at := month.End().Add(inv.Grace())
		if at.After(now) {
			h.CloseDetail = "It closes by itself at " + minuteText(loc, at) + ", or close it now."
		} else {
			h.CloseDetail = "It was due at " + minuteText(loc, at) + ": the next automatic close runs it, or close it now."
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch pr.Status {
	case invoicing.CloseDone:
		h.CloseState = "done"
		if pr.FinishedAt != nil {
			h.CloseDetail = "Finished at " + minuteText(loc, *pr.FinishedAt) + ". "
		}
		h.CloseDetail += fmt.Sprintf("%d invoices and %d statements drafted.", pr.Invoices, pr.Statements)
	case invoicing.CloseFailed:
		h.CloseState = "failed"
		h.CloseDetail = pr.Problem
	default:
		h.CloseState = "running"
		h.CloseDetail = fmt.Sprintf("Started at %s: %d of %d customers and %d of %d providers done.", minuteText(loc, pr.StartedAt),
			pr.CustomersDone, pr.CustomersTotal, pr.ProvidersDone, pr.ProvidersTotal)
	}
	return nil
}

// maxDiscrepancies is how many discrepancies the home counts before it writes "200+".
const maxDiscrepancies = 200

// adminHome is what the platform's administrators watch, each a count linking to its page (see
// docs/home.md, "Administrators").
func (s *Server) adminHome(ctx context.Context, now time.Time) (*templates.AdminHome, error) {
	h := &templates.AdminHome{}
	if b := s.cfg.Batches; b != nil {
		q, err := b.Queue(ctx)
		if err != nil {
			return nil, err
		}
		h.Tasks = append(h.Tasks, templates.HomeTask{ID: "batch-queue", Label: countedLabel(q.Lines.Pending, false, "batch line waiting in the queue", "batch lines waiting in the queue"),
			Link: "/admin/batches", Count: strconv.FormatInt(q.Lines.Pending, 10), Waiting: q.Lines.Pending > 0})
	}
	if cat := s.cfg.Catalog; cat != nil {
		active, err := cat.ListActive(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range active {
			if o.RigState == catalog.RigOffline {
				h.Offline = append(h.Offline, homeRig(o, now))
			}
		}
		h.Tasks = append(h.Tasks, task("rigs-offline", "rig offline", "rigs offline", "/home#offline-rigs", len(h.Offline), false))
	}
	if r := s.cfg.Requests; r != nil {
		list, err := r.Discrepancies(ctx, requestlog.DiscrepancyFilter{State: requestlog.DiscrepanciesOpen, Limit: maxDiscrepancies})
		if err != nil {
			return nil, err
		}
		h.Tasks = append(h.Tasks, task("discrepancies", "open discrepancy", "open discrepancies", "/admin/discrepancies", len(list),
			len(list) >= maxDiscrepancies))
	}
	return h, nil
}
