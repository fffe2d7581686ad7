package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services/invoicing"
)

// The documents' numbering, the close's grace, the minimum payout and the seller come from
// the environment, with defaults; a bad value stops the start with an error naming the
// variable.
func TestInvoicingComesFromTheEnvironment(t *testing.T) {
	vars := []string{"GPUMARKET_INVOICE_NUMBER_FORMAT", "GPUMARKET_INVOICE_FIRST_NUMBER", "GPUMARKET_STATEMENT_NUMBER_FORMAT",
		"GPUMARKET_STATEMENT_FIRST_NUMBER", "GPUMARKET_INVOICE_GRACE", "GPUMARKET_PAYOUT_MINIMUM", "GPUMARKET_SELLER_NAME",
		"GPUMARKET_SELLER_ADDRESS", "GPUMARKET_SELLER_COUNTRY", "GPUMARKET_SELLER_VAT_ID"}
	load := func(env map[string]string) (InvoicingConfig, error) {
		t.Helper()
		for _, v := range vars {
			t.Setenv(v, env[v])
		}
		c, err := configFromEnv()
		return c.Invoicing, err
	}
	c, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.InvoiceNumbers.Number(2026, 1) != "GPM-2026-000001" || c.StatementNumbers.Number(2026, 2) != "GPS-2026-000002" ||
		c.Grace != 72*time.Hour || c.MinimumPayout != 10_00 || c.MinimumPayoutSet || c.Seller != (invoicing.Party{}) {
		t.Errorf("defaults: %+v", c)
	}
	c, err = load(map[string]string{"GPUMARKET_INVOICE_NUMBER_FORMAT": "INV/{year}/{seq:04}", "GPUMARKET_INVOICE_FIRST_NUMBER": "418",
		"GPUMARKET_INVOICE_GRACE": "24h", "GPUMARKET_PAYOUT_MINIMUM": "25.50", "GPUMARKET_SELLER_NAME": "gpumarket GmbH",
		"GPUMARKET_SELLER_ADDRESS": "Hauptstraße 1|10115 Berlin", "GPUMARKET_SELLER_COUNTRY": "de", "GPUMARKET_SELLER_VAT_ID": "DE123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if c.InvoiceNumbers.Number(2026, 418) != "INV/2026/0418" || c.InvoiceNumbers.First() != 418 || c.Grace != 24*time.Hour ||
		c.MinimumPayout != 25_50 || !c.MinimumPayoutSet || c.Seller.Address != "Hauptstraße 1\n10115 Berlin" || c.Seller.Country != "DE" {
		t.Errorf("set: %+v", c)
	}
	for _, bad := range []struct {
		env  map[string]string
		name string
	}{
		{map[string]string{"GPUMARKET_INVOICE_NUMBER_FORMAT": "GPM-{seq}"}, "GPUMARKET_INVOICE_NUMBER_FORMAT"},
		{map[string]string{"GPUMARKET_INVOICE_FIRST_NUMBER": "0"}, "GPUMARKET_INVOICE_FIRST_NUMBER"},
		{map[string]string{"GPUMARKET_STATEMENT_FIRST_NUMBER": "one"}, "GPUMARKET_STATEMENT_FIRST_NUMBER"},
		{map[string]string{"GPUMARKET_INVOICE_GRACE": "three days"}, "GPUMARKET_INVOICE_GRACE"},
		{map[string]string{"GPUMARKET_PAYOUT_MINIMUM": "10.005"}, "GPUMARKET_PAYOUT_MINIMUM"},
		{map[string]string{"GPUMARKET_PAYOUT_MINIMUM": "-1"}, "GPUMARKET_PAYOUT_MINIMUM"},
		{map[string]string{"GPUMARKET_SELLER_NAME": "gpumarket", "GPUMARKET_SELLER_COUNTRY": "ZZ"}, "GPUMARKET_SELLER_"},
	} {
		if _, err := load(bad.env); err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%v: %v, want an error naming %s", bad.env, err, bad.name)
		}
	}
}

// `gpumarket invoices close --period YYYY-MM` closes the month and says what it made; a bad
// period is refused before anything is written.
func TestInvoicesCloseFromTheCommandLine(t *testing.T) {
	_, url := dbtest.NewWithURL(t)
	cfg := Config{DatabaseURL: url}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var out bytes.Buffer
	if err := invoices(context.Background(), cfg, log, []string{"close", "--period", "2026-13"}, &out); err == nil ||
		!strings.Contains(err.Error(), "YYYY-MM") {
		t.Errorf("a bad period: %v", err)
	}
	// A platform with no usage and no ledger movement has nothing to close: the month is refused
	// with the reason, and nothing is written.
	out.Reset()
	err := invoices(context.Background(), cfg, log, []string{"close", "--period", "2020-01"}, &out)
	if err == nil || !strings.Contains(err.Error(), "nothing to close") {
		t.Errorf("closing a month before the platform's first usage: %v, want refused as nothing to close", err)
	}
	if strings.Contains(out.String(), "closed 2020-01") {
		t.Errorf("output of a refused close:\n%s", out.String())
	}
}
