package metering

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/jackc/pgx/v5"
)

// post writes one ledger transaction per customer account: its credit down by its charges,
// each provider's payable up by its asks, platform revenue the difference. Each sum fits a
// posting: judge refused every event that would have taken one past it.
func (m *Meter) post(ctx context.Context, tx pgx.Tx, stored []*pricedEvent, now time.Time) (money.BigPico, error) {
	type sums struct {
		charge    money.Pico
		providers map[string]money.Pico
		requests  int
	}
	byAccount := map[string]*sums{}
	var total money.BigPico
	for _, pe := range stored {
		if pe.charge == 0 && pe.payable == 0 {
			continue
		}
		s := byAccount[pe.account]
		if s == nil {
			s = &sums{providers: map[string]money.Pico{}}
			byAccount[pe.account] = s
		}
		var err error
		if s.charge, err = s.charge.Add(pe.charge); err != nil {
			return total, err
		}
		if s.providers[pe.provider], err = s.providers[pe.provider].Add(pe.payable); err != nil {
			return total, err
		}
		s.requests++
	}
	// The total is summed from the accounts' sums, a few big additions a batch, not one per
	// event.
	for _, s := range byAccount {
		total = total.AddPico(s.charge)
	}
	if len(byAccount) == 0 {
		return total, nil
	}
	revenue, err := m.ledgerAccount(ctx, ledger.AccountPlatformRevenue, "")
	if err != nil {
		return total, err
	}
	accounts := sortedKeys(byAccount)
	txns := make([]ledger.TransactionInput, 0, len(accounts))
	for _, acc := range accounts {
		s := byAccount[acc]
		customer, err := m.ledgerAccount(ctx, ledger.AccountCustomerCredit, acc)
		if err != nil {
			return total, err
		}
		postings := []ledger.Posting{{Account: customer, Amount: -s.charge}}
		margin := s.charge
		for _, prov := range sortedKeys(s.providers) {
			payable, err := m.ledgerAccount(ctx, ledger.AccountProviderPayable, prov)
			if err != nil {
				return total, err
			}
			postings = append(postings, ledger.Posting{Account: payable, Amount: s.providers[prov]})
			margin -= s.providers[prov]
		}
		postings = append(postings, ledger.Posting{Account: revenue, Amount: margin})
		txns = append(txns, ledger.TransactionInput{
			Kind: ledger.TransactionUsage, OccurredAt: now,
			Memo:     "Usage: " + money.Counted(int64(s.requests), "request", "requests"),
			Postings: postings,
		})
	}
	// In one round trip, after locking every account in id order: the batch's transaction holds
	// the ledger's locks, which the other committer waits on, for as short a time as it can.
	return total, m.cfg.Ledger.PostAllTx(ctx, tx, txns)
}

// resolveLedgers looks up the ledger accounts a batch's events may post to before its
// transaction takes a connection, so that posting finds them remembered. Looked up from
// inside the transaction, on a connection of their own, they could leave the committers
// holding every connection of the pool, each waiting for one more. An id that names no
// organisation is left for the checks in the transaction to refuse.
func (m *Meter) resolveLedgers(ctx context.Context, cands []candidate) error {
	if len(cands) == 0 {
		return nil
	}
	need := map[ledgerKey]bool{{ledger.AccountPlatformRevenue, ""}: true}
	for i := range cands {
		need[ledgerKey{ledger.AccountCustomerCredit, cands[i].claims.AccountID}] = true
		need[ledgerKey{ledger.AccountProviderPayable, cands[i].providerID}] = true
	}
	for k := range need {
		_, err := m.ledgerAccount(ctx, k.kind, k.owner)
		if code := services.ErrorCode(err); err != nil && code != services.CodeNotFound && code != services.CodeInvalid {
			return err
		}
	}
	return nil
}

// ledgerAccount resolves a ledger account once and remembers it: ledger accounts never change
// owner or kind. It runs outside the batch's transaction (AccountFor takes its own
// connection), which is safe because creating an account is idempotent.
func (m *Meter) ledgerAccount(ctx context.Context, kind ledger.AccountKind, owner string) (ledger.LedgerAccountID, error) {
	k := ledgerKey{kind, owner}
	m.mu.Lock()
	id, ok := m.ledgers[k]
	m.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := m.cfg.Ledger.AccountFor(ctx, kind, owner)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.ledgers[k] = id
	m.mu.Unlock()
	return id, nil
}
