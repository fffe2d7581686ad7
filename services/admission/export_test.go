package admission

// What the package's external tests read of its insides.

// MaxStale is how old the figures may be before a request waits for fresh ones.
const MaxStale = maxStale

// Refreshing says whether the account's figures are being reread in the background.
func (a *Admission) Refreshing(accountID string) bool {
	sp := a.spender(accountID)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.refreshing
}
