package home

import (
	"context"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/payouts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// providerHome is a provider's account at a glance (see docs/home.md, "A provider's account").
func (s *Server) providerHome(ctx context.Context, provider string, now time.Time, loc *time.Location) (*templates.ProviderHome, error) {
	h := &templates.ProviderHome{Earnings: "—"}
	if s.cfg.Catalog != nil {
		rigs, err := s.cfg.Catalog.ListOwn(ctx, provider)
		if err != nil {
			return nil, err
		}
		for _, o := range rigs {
			h.Rigs = append(h.Rigs, homeRig(o, now))
		}
	}
	from, to, _, _ := monthSoFar(now)
	earned := money.BigPico{}
	if s.cfg.Usage != nil {
		traffic, err := s.cfg.Usage.ProviderTraffic(ctx, provider, metering.UsageFilter{From: from, To: to})
		if err != nil {
			return nil, err
		}
		earned = traffic.Total.Earned
		h.Earnings, h.EarningsSpan = money.FormatBigCents(earned), spanText(from, to)
	}
	var err error
	if h.Payout, err = s.nextPayout(ctx, provider, earned, now, loc); err != nil {
		return nil, err
	}
	return h, nil
}

// homeRig is a rig and where it stands: paused when its provider paused it, else its rig's
// state (active, pending, offline) with the reason the rigs page gives.
func homeRig(o catalog.Offering, now time.Time) templates.HomeRig {
	r := templates.HomeRig{ID: o.ID, Provider: o.ProviderName, Model: o.Model,
		Hardware: fmt.Sprintf("%dx %s", o.GPUCount, o.GPUName), State: string(o.RigState), Reason: o.RigStateReason(now)}
	if o.Status == catalog.StatusPaused {
		r.State, r.Reason = "paused", "Paused by you: it takes no traffic until you resume it."
	}
	return r
}

// nextPayout is the provider's next payout: an issued statement's payout not yet paid, else
// what this month's statement will pay, or why nothing is coming: no Stripe account to pay
// into, or less than the minimum payout (which carries over to the next statement).
func (s *Server) nextPayout(ctx context.Context, provider string, earned money.BigPico, now time.Time, loc *time.Location) (templates.HomePayout, error) {
	out := templates.HomePayout{Link: "/provider/payouts", LinkText: "Payouts"}
	inv, po := s.cfg.Invoicing, s.Payments.Payouts
	if inv == nil || po == nil {
		out.None = "Payouts are not available on this server."
		return out, nil
	}
	acct, err := po.Account(ctx, provider)
	if err != nil {
		return out, err
	}
	if acct.State != payouts.AccountComplete {
		out.None = "No payout can be sent: connect a Stripe account to be paid."
		if acct.State == payouts.AccountOnboarding {
			out.None = "No payout can be sent yet: finish setting up your Stripe account."
		}
		out.LinkText = "Connect Stripe"
		return out, nil
	}
	statements, err := inv.ProviderStatements(ctx, provider)
	if err != nil {
		return out, err
	}
	var carried invoicing.Cents
	for i, st := range statements { // latest period first
		if i == 0 && st.Status != invoicing.StatusVoid {
			carried = st.CarriedOut
		}
		if st.Status != invoicing.StatusIssued || st.Payout <= 0 {
			continue
		}
		out.Amount = core.CentsText(int64(st.Payout))
		out.When = "For " + st.Period.Label() + " (statement " + st.DisplayNumber + "): "
		p, found, err := po.ForStatement(ctx, st.ID)
		switch {
		case err != nil:
			return out, err
		case found && p.Status == payouts.StatusFailed:
			out.When += "the transfer failed and finance will send it again."
		default:
			out.When += "being transferred to your Stripe account."
		}
		return out, nil
	}
	cents, err := invoicing.CentsOf(earned)
	if err != nil {
		return out, err
	}
	next := cents + carried
	month := invoicing.PeriodOf(now)
	if next < inv.MinimumPayout() {
		out.None = fmt.Sprintf("None yet: %s earned in %s so far", core.CentsText(int64(cents)), month.Label())
		if carried != 0 {
			out.None += fmt.Sprintf(" and %s carried over", core.CentsText(int64(carried)))
		}
		out.None += fmt.Sprintf(" is below the minimum payout of %s, which carries over to the next statement.",
			core.CentsText(int64(inv.MinimumPayout())))
		return out, nil
	}
	out.Amount = core.CentsText(int64(next)) + " so far"
	out.When = fmt.Sprintf("For %s: its statement is drafted by %s and paid once finance approves it.", month.Label(),
		minuteText(loc, month.End().Add(inv.Grace())))
	return out, nil
}
