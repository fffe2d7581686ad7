package documents

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/money"
)

// usageLine is a usage line priced exactly and rounded half up to the cent, as the invoicing
// side rounds each line once.
func usageLine(t testing.TB, desc string, in, out int64, inPrice, outPrice string) Line {
	t.Helper()
	ip, err := money.ParseMicroUSD(inPrice)
	if err != nil {
		t.Fatal(err)
	}
	op, err := money.ParseMicroUSD(outPrice)
	if err != nil {
		t.Fatal(err)
	}
	a, err := money.ChargeFor(in, ip)
	if err != nil {
		t.Fatal(err)
	}
	b, err := money.ChargeFor(out, op)
	if err != nil {
		t.Fatal(err)
	}
	exact := money.BigPicoOf(a).AddPico(b)
	return Line{
		Kind: LineUsage, Description: desc,
		Tokens: &Tokens{Input: in, Output: out, InputPrice: ip, OutputPrice: op},
		Amount: roundCents(t, exact), Exact: &exact,
	}
}

func roundCents(t testing.TB, p money.BigPico) Cents {
	t.Helper()
	c, err := strconv.ParseInt(digitsOnly(p.Decimal(2)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return Cents(c)
}

func digitsOnly(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// sampleInvoice is the March 2026 invoice of a customer in Łódź: three usage lines, late
// usage from February, an adjustment, credits bought, and a summary with carbon in CO₂e.
func sampleInvoice(t testing.TB) Document {
	t.Helper()
	feb := Month(2026, time.February)
	late := usageLine(t, "standard · meta-llama/Meta-Llama-3-8B-Instruct", 48_200, 12_050, "0.15", "0.15")
	late.Kind, late.ForPeriod = LineLateUsage, &feb
	lines := []Line{
		usageLine(t, "realtime · meta-llama/Meta-Llama-3-70B-Instruct", 1_204_331, 402_118, "0.9", "0.9"),
		usageLine(t, "standard · meta-llama/Meta-Llama-3-8B-Instruct", 18_342_907, 5_120_433, "0.149", "0.149"),
		usageLine(t, "batch · mistralai/Mistral-7B-Instruct-v0.3", 72_004_125, 9_811_002, "0.05", "0.075"),
		late,
		{Kind: LineAdjustment, Description: "Goodwill credit for the degraded service of 2026-03-12", Amount: -500},
		{Kind: LineCredits, Description: "Credits bought on 2026-03-04", Amount: 5000},
	}
	var sub Cents
	for _, l := range lines {
		if l.Kind != LineCredits {
			sub += l.Amount
		}
	}
	opening := Cents(1250)
	closing := opening + 5000 - sub
	due := Cents(0)
	if closing < 0 {
		due = -closing
	}
	return Document{
		Kind: KindInvoice, Number: "GPM-2026-000042", Status: StatusIssued,
		IssueDate: time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC),
		Period:    Month(2026, time.March),
		DueDate:   time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC),
		Currency:  "USD",
		Seller: Party{
			LegalName: "gpumarket Ltd", Address: []string{"1 Compute Way", "London EC1A 1AA"},
			Country: "United Kingdom", VATID: "GB123456789",
		},
		Buyer: Party{
			LegalName: "Łódź Analytics sp. z o.o.", Address: []string{"ul. Piotrkowska 104", "90-006 Łódź"},
			Country: "Poland", VATID: "PL7251234567", PONumber: "PO-2026-117",
		},
		Lines:  lines,
		Totals: Totals{Subtotal: sub, Total: sub, AmountDue: due, Balance: &Balance{Opening: opening, Closing: closing}},
		Notes: []string{
			"Each line is the exact sum of its usage, rounded once to the cent, half a cent up.",
			"Reverse charge: VAT to be accounted for by the recipient.",
		},
		Summary: []Figure{
			{Label: "Saved against enterprise GPUs", Value: "$41.20 (38%)"},
			{Label: "Energy", Value: "3.1 kWh (estimate)"},
			{Label: "Carbon", Value: "1.84 kg CO₂e (estimate)"},
		},
	}
}

// manyLines is the sample invoice with n usage lines, enough to need more pages.
func manyLines(t testing.TB, n int) Document {
	t.Helper()
	d := sampleInvoice(t)
	d.Lines = nil
	var sub Cents
	for i := range n {
		l := usageLine(t, fmt.Sprintf("standard · org-%02d/model-%02d-Instruct", i, i), int64(1000*(i+1)), int64(300*(i+1)), "0.149", "0.149")
		d.Lines = append(d.Lines, l)
		sub += l.Amount
	}
	d.Totals = Totals{Subtotal: sub, Total: sub, AmountDue: sub}
	return d
}
