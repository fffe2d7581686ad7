package reports

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/money"
)

// The baseline of savings is everything on enterprise GPUs: each hour's chargeable tokens
// (what the customer was charged for: a request charged nothing is in no baseline) priced at
// the realtime tier's price in force at the start of that hour. Rows served on the realtime
// tier are their own baseline (what they were charged), so that a realtime-only customer saves
// exactly nothing; an hour with no realtime price in the book is its own baseline as well, a
// saving the platform cannot show being no saving at all. docs/methodology.md, "Savings".

// savingsLine is the rollups of one period, tier, model and price version: the grain of an
// invoice's usage lines (per month), so that month totals can be rounded as the invoice rounds.
type savingsLine struct {
	accountID               string
	period                  time.Time
	tier, model             string
	priceID                 int64
	requests, input, output int64
	cached                  int64 // of input
	chargeableTokens        int64
	spend, baseline         money.BigPico
}

// readSavingsLines reads accounts' savings lines: the meter's rollups of the accounts
// (metering.ChargeLines, through usage_hourly_account_idx, never usage_events) split at every
// change of the realtime tier's price book (catalog.ReadPriceBook), so that one realtime price
// (PriceBook.At: a model's own rows where it has one in force, else the tier's default) prices
// each split's tokens; the splits are summed back into their line.
func readSavingsLines(ctx context.Context, q Querier, accountIDs []string, from, to time.Time, unit string) ([]savingsLine, error) {
	book, err := catalog.ReadPriceBook(ctx, q)
	if err != nil {
		return nil, err
	}
	var breaks []time.Time
	for _, p := range book[catalog.TierRealtime] { // oldest first
		if len(breaks) == 0 || p.EffectiveFrom.After(breaks[len(breaks)-1]) {
			breaks = append(breaks, p.EffectiveFrom)
		}
	}
	charged, err := metering.ChargeLines(ctx, q, metering.RollupWindow{AccountIDs: accountIDs, From: from, To: to, Unit: unit}, breaks)
	if err != nil {
		return nil, err
	}
	type key struct {
		account     string
		period      time.Time
		tier, model string
		priceID     int64
	}
	at := map[key]int{}
	var out []savingsLine
	for _, c := range charged {
		k := key{c.AccountID, c.Period, c.Tier, c.Model, c.PriceID}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, savingsLine{accountID: c.AccountID, period: c.Period, tier: c.Tier, model: c.Model, priceID: c.PriceID})
		}
		l := &out[i]
		l.requests += c.Requests
		l.input += c.InputTokens
		l.output += c.OutputTokens
		l.cached += c.CachedInputTokens
		l.chargeableTokens += c.InputTokens - c.UnchargedInputTokens + c.OutputTokens - c.UnchargedOutputTokens
		l.spend = l.spend.Add(c.Charge)
		l.baseline = l.baseline.Add(baselineOf(book, breaks, c))
	}
	return out, nil
}

// baselineOf is the charge line's tokens at the realtime price in force over its span; a line on the realtime
// tier, or of a span without a realtime price, is its own baseline.
func baselineOf(book catalog.PriceBook, breaks []time.Time, c metering.ChargeLine) money.BigPico {
	if c.Tier == string(catalog.TierRealtime) || c.Span == 0 {
		return c.Charge
	}
	p, ok := book.At(catalog.TierRealtime, c.Model, breaks[c.Span-1])
	if !ok {
		return c.Charge
	}
	tokens := func(n int64, price money.MicroUSD) *big.Int {
		return new(big.Int).Mul(big.NewInt(n), big.NewInt(int64(price)))
	}
	sum := tokens(c.InputTokens-c.UnchargedInputTokens-c.CachedInputTokens+c.UnchargedCachedInputTokens, p.Input)
	sum.Add(sum, tokens(c.CachedInputTokens-c.UnchargedCachedInputTokens, p.CachedInput))
	sum.Add(sum, tokens(c.OutputTokens-c.UnchargedOutputTokens, p.Output))
	var b money.BigPico
	_ = b.Scan(sum.String()) // a micro-dollar per million tokens is a picodollar per token
	return b
}

// Savings is the account's spend against the baseline per period and tier, with the totals
// and the benchmark's H100 figure as a second reference. For a month report each row also
// carries the month's spend as its invoice rounds it (InvoiceSpendUSD).
func (s *Service) Savings(ctx context.Context, accountID string, q Query) (_ Savings, err error) {
	defer services.Wrap(&err, "reports.Savings(%s)", accountID)
	if err := q.Validate(); err != nil {
		return Savings{}, err
	}
	lines, err := readSavingsLines(ctx, s.pool, []string{accountID}, q.From, q.To, q.trunc())
	if err != nil {
		return Savings{}, err
	}
	out := Savings{AccountID: accountID, From: q.From, To: q.To, Group: q.Group, Rows: []SavingsRow{},
		MethodVersion: MethodVersion}
	type key struct {
		period time.Time
		tier   string
	}
	at := map[key]int{}
	cents := map[key]int64{}
	var chargeable int64
	var totalCents int64
	for _, l := range lines {
		k := key{l.period, l.tier}
		i, ok := at[k]
		if !ok {
			i = len(out.Rows)
			at[k] = i
			out.Rows = append(out.Rows, SavingsRow{Period: l.period, Tier: l.tier, MethodVersion: MethodVersion})
		}
		r := &out.Rows[i]
		r.Requests += l.requests
		r.InputTokens += l.input
		r.CachedInputTokens += l.cached
		r.OutputTokens += l.output
		r.Spend = r.Spend.Add(l.spend)
		r.Baseline = r.Baseline.Add(l.baseline)
		chargeable += l.chargeableTokens
		if q.Group == GroupMonth {
			c, err := CentsOf(l.spend)
			if err != nil {
				return Savings{}, err
			}
			cents[k] += c
			totalCents += c
		}
	}
	slices.SortFunc(out.Rows, func(a, b SavingsRow) int {
		if c := a.Period.Compare(b.Period); c != 0 {
			return c
		}
		return catalog.TierRank(a.Tier) - catalog.TierRank(b.Tier)
	})
	t := &out.Totals
	for i := range out.Rows {
		r := &out.Rows[i]
		r.Savings = r.Baseline.Add(r.Spend.Neg())
		r.SavingsPct = Percent(r.Savings, r.Baseline)
		if q.Group == GroupMonth {
			r.InvoiceSpendUSD = centsText(cents[key{r.Period, r.Tier}])
		}
		t.Requests += r.Requests
		t.InputTokens += r.InputTokens
		t.CachedInputTokens += r.CachedInputTokens
		t.OutputTokens += r.OutputTokens
		t.Spend = t.Spend.Add(r.Spend)
		t.Baseline = t.Baseline.Add(r.Baseline)
	}
	t.Savings = t.Baseline.Add(t.Spend.Neg())
	t.SavingsPct = Percent(t.Savings, t.Baseline)
	if q.Group == GroupMonth {
		t.InvoiceSpendUSD = centsText(totalCents)
		var spends []int64
		var bases []money.BigPico
		for _, r := range out.Rows {
			spends, bases = append(spends, cents[key{r.Period, r.Tier}]), append(bases, r.Baseline)
		}
		inv, err := InvoicedSaving(spends, bases)
		if err != nil {
			return Savings{}, err
		}
		t.Invoiced = &inv
	}
	out.Reference = h100Reference(chargeable)
	return out, nil
}

// The second reference: the benchmark paper's assumed on-demand price of an H100, $2.00 an
// hour, over the throughput it measured on one H100 PCIe at 16 requests per second on
// DeepSeek-R1-Distill-Qwen-14B, which it writes as $0.185 per million tokens.
const (
	h100ReferenceMicroUSDPerMTok = 185_000
	h100ReferenceName            = "1x H100 PCIe on demand at $2.00 an hour, at 16 requests/s on DeepSeek-R1-Distill-Qwen-14B"
	h100ReferenceSource          = "benchmark paper's assumption, AIBC 2025"
	h100ReferenceDate            = "2025"
)

// h100Reference prices the chargeable tokens at the benchmark's H100 figure.
func h100Reference(tokens int64) *PriceReference {
	cost := new(big.Int).Mul(big.NewInt(tokens), big.NewInt(h100ReferenceMicroUSDPerMTok))
	var p money.BigPico
	_ = p.Scan(cost.String())
	return &PriceReference{Name: h100ReferenceName, Source: h100ReferenceSource, Date: h100ReferenceDate,
		USDPerMT: money.MicroUSD(h100ReferenceMicroUSDPerMTok).Decimal(), Cost: p}
}

// CentsOf rounds an exact amount to the cent by the invoice's rule: half up, away from zero,
// the rule of money.BigPico.Decimal (services/invoicing rounds each line with it). A month's
// spend as its invoice shows it is the sum of its lines' cents, one line per tier, model and
// price version.
func CentsOf(p money.BigPico) (int64, error) {
	d := p.Decimal(2)
	whole, frac := d[:len(d)-3], d[len(d)-2:]
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reports: %s in cents: %w", p, money.ErrOverflow)
	}
	return v, nil
}

func centsText(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// Invoiced is a month's saving as its invoice prints it: the spend as the invoice's lines round
// it, the baseline rounded to the cent per tier, the saving their difference, and its share of
// the baseline. The invoice's summary and the month report on /reports both take their figures
// from InvoicedSaving, so that they never differ (docs/money.md, "Documents foot").
type Invoiced struct {
	SpendCents    int64  `json:"spend_cents"`
	BaselineCents int64  `json:"baseline_cents"`
	SavedCents    int64  `json:"saved_cents"`
	SavedPct      string `json:"saved_percent"` // one decimal, "" when the baseline is zero
}

// InvoicedSaving is the saving of tiers whose spend is already in cents as the invoice's lines
// round it (spendCents[i]) and whose exact baselines are baselines[i].
func InvoicedSaving(spendCents []int64, baselines []money.BigPico) (Invoiced, error) {
	var out Invoiced
	for i, b := range baselines {
		c, err := CentsOf(b)
		if err != nil {
			return Invoiced{}, err
		}
		out.BaselineCents += c
		out.SpendCents += spendCents[i]
	}
	out.SavedCents = out.BaselineCents - out.SpendCents
	if out.BaselineCents > 0 {
		out.SavedPct = Percent(centsPico(out.SavedCents), centsPico(out.BaselineCents))
	}
	return out, nil
}

// RoundedSaving is a saving as a page prints it beside its spend and baseline: the two rounded
// to the cent once each (CentsOf), the saving their difference and its share of the rounded
// baseline, so that the spend and the saving shown add up to the baseline shown. A month's
// figures come from InvoicedSaving instead, which rounds the spend as its invoice's lines do.
func RoundedSaving(spend, baseline money.BigPico) (Invoiced, error) {
	c, err := CentsOf(spend)
	if err != nil {
		return Invoiced{}, err
	}
	return InvoicedSaving([]int64{c}, []money.BigPico{baseline})
}

func centsPico(c int64) money.BigPico {
	var b money.BigPico
	_ = b.Scan(new(big.Int).Mul(big.NewInt(c), big.NewInt(int64(money.PicoPerCent))).String())
	return b
}

// Percent is part of whole in percent with one decimal, exactly, rounded half away from zero;
// "" when whole is zero. The invoice's summary writes its saving with it too.
func Percent(part, whole money.BigPico) string {
	if whole.Sign() == 0 {
		return ""
	}
	p, _ := new(big.Rat).SetString(part.Decimal(12))
	w, _ := new(big.Rat).SetString(whole.Decimal(12))
	return new(big.Rat).Mul(new(big.Rat).Quo(p, w), big.NewRat(100, 1)).FloatString(1)
}
