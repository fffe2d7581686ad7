package ledger

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The JSON API of the balances, the adjustments and the price book.

type accountBalanceJSON struct {
	LedgerAccountID ledger.LedgerAccountID `json:"ledger_account_id"`
	Kind            ledger.AccountKind     `json:"kind"`
	OwnerAccountID  string                 `json:"owner_account_id,omitempty"`
	OwnerName       string                 `json:"owner_name,omitempty"`
	BalancePico     money.BigPico          `json:"balance_pico"`
	BalanceUSD      string                 `json:"balance_usd"`
	Negative        bool                   `json:"negative"` // a customer's credit below zero
}

func (s *Server) apiFinanceBalances(c echo.Context) error {
	balances, err := s.Payments.Ledger.Balances(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]accountBalanceJSON, 0, len(balances))
	for _, b := range balances {
		out = append(out, accountBalanceJSON{LedgerAccountID: b.Account, Kind: b.Kind, OwnerAccountID: b.OwnerAccountID,
			OwnerName: b.OwnerName, BalancePico: b.Balance, BalanceUSD: core.USD(b.Balance), Negative: flagged(b)})
	}
	return c.JSON(http.StatusOK, map[string]any{"accounts": out, "unit": "picodollar (1e-12 USD)"})
}

type postingJSON struct {
	LedgerAccountID ledger.LedgerAccountID `json:"ledger_account_id"`
	AmountPico      money.Pico             `json:"amount_pico"`
	AmountUSD       string                 `json:"amount_usd"`
}

type transactionJSON struct {
	ID         string                 `json:"id"`
	Kind       ledger.TransactionKind `json:"kind"`
	Memo       string                 `json:"memo"`
	CreatedBy  string                 `json:"created_by"`
	OccurredAt time.Time              `json:"occurred_at"`
	CreatedAt  time.Time              `json:"created_at"`
	Postings   []postingJSON          `json:"postings"`
}

func transactionOf(t ledger.Transaction) transactionJSON {
	j := transactionJSON{ID: t.ID, Kind: t.Kind, Memo: t.Memo, CreatedBy: t.CreatedBy, OccurredAt: t.OccurredAt, CreatedAt: t.CreatedAt,
		Postings: make([]postingJSON, 0, len(t.Postings))}
	for _, p := range t.Postings {
		j.Postings = append(j.Postings, postingJSON{LedgerAccountID: p.Account, AmountPico: p.Amount, AmountUSD: core.USD(p.Amount)})
	}
	return j
}

func (s *Server) apiAdjust(c echo.Context) error {
	var in struct {
		AccountID string          `json:"account_id"`
		AmountUSD json.RawMessage `json:"amount_usd"` // a string or a number, signed
		Reason    string          `json:"reason"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	txn, err := s.adjust(c, in.AccountID, core.JSONText(in.AmountUSD), in.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, transactionOf(txn))
}

func (s *Server) apiFinancePrices(c echo.Context) error {
	ctx := c.Request().Context()
	book, err := s.catalog.PriceBook(ctx)
	if err != nil {
		return err
	}
	history, err := s.catalog.PriceHistory(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"current": core.PricesInTierOrder(book, s.Now()), "history": history})
}

func (s *Server) apiSchedulePrice(c echo.Context) error {
	var body struct {
		Tier   string          `json:"tier"`
		Model  string          `json:"model"`               // empty for the tier's default
		Input  json.RawMessage `json:"input_usd_per_mtok"`  // a string or a number
		Output json.RawMessage `json:"output_usd_per_mtok"` // a string or a number
		// CachedInput is optional, a string or a number: absent, a quarter of the input price.
		CachedInput   json.RawMessage `json:"cached_input_usd_per_mtok"`
		EffectiveFrom string          `json:"effective_from"` // RFC 3339
		Free          bool            `json:"free"`           // a $0 price is meant
	}
	if err := core.DecodeJSON(c, &body); err != nil {
		return err
	}
	in, err := priceChange(body.Tier, body.Model, core.JSONText(body.Input), core.JSONText(body.Output), core.JSONText(body.CachedInput), body.EffectiveFrom,
		body.Free, rfc3339, s.Now())
	if err != nil {
		return err
	}
	ch, err := s.schedulePrice(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, ch)
}
