package accounts

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

func TestAPIKeysAreShownOnceAndStoredHashed(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	dev, err := s.SignUp(ctx, SignUpInput{Email: "dev@example.com", Password: "long enough!", Role: RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := s.SignUp(ctx, SignUpInput{Email: "other@example.com", Password: "long enough!", Role: RoleDeveloper})
	limit := money.Pico(5 * money.PicoPerUSD)
	k, secret, err := s.CreateKey(ctx, dev, NewKeyInput{Name: " ci ", Limit: &limit, DefaultTier: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) < 40 || !strings.HasPrefix(secret, k.Prefix) || k.Name != "ci" {
		t.Fatalf("key %+v secret %q", k, secret)
	}
	var stored int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE key_hash::text LIKE '%' || $1 || '%'`, secret).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the secret is stored in clear: %d %v", stored, err)
	}
	got, err := s.KeyBySecret(ctx, secret)
	if err != nil || got.ID != k.ID || got.AccountID != dev.AccountID || *got.Limit != limit || got.DefaultTier != "batch" {
		t.Fatalf("KeyBySecret = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "gm_x", secret + "x", strings.ToUpper(secret)} {
		if _, err := s.KeyBySecret(ctx, bad); services.ErrorCode(err) != services.CodeUnauthorized {
			t.Errorf("KeyBySecret(%q) = %v", bad, err)
		}
	}
	used := c.t.Add(time.Minute)
	if err := s.TouchKeys(ctx, map[string]time.Time{k.ID: used}); err != nil {
		t.Fatal(err)
	}
	list, _ := s.Keys(ctx, dev.AccountID)
	if len(list) != 1 || list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(used) {
		t.Fatalf("keys %+v", list)
	}
	if err := s.RevokeKey(ctx, other.AccountID, k.ID); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("another account revoked the key: %v", err)
	}
	if err := s.RevokeKey(ctx, dev.AccountID, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeyBySecret(ctx, secret); services.ErrorCode(err) != services.CodeUnauthorized {
		t.Fatalf("a revoked key still works: %v", err)
	}
	if _, _, err := s.CreateKey(ctx, dev, NewKeyInput{Name: "", DefaultTier: "gold"}); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("invalid key input: %v", err)
	}
}

// An account holds at most MaxLiveKeys live keys, even when the last places are asked for at
// once; a revoked key frees its place.
func TestLiveKeysAreCapped(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	dev, err := s.SignUp(ctx, SignUpInput{Email: "dev@example.com", Password: "long enough!", Role: RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxLiveKeys - 5 {
		if _, _, err := s.CreateKey(ctx, dev, NewKeyInput{Name: fmt.Sprintf("app %d", i)}); err != nil {
			t.Fatalf("key %d: %v", i+1, err)
		}
	}
	// Ten at once for the last five places.
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, refused := 0, 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.CreateKey(ctx, dev, NewKeyInput{Name: fmt.Sprintf("racer %d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch services.ErrorCode(err) {
			case "":
				made++
			case services.CodeConflict:
				refused++
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if made != 5 || refused != 5 {
		t.Fatalf("ten keys asked for at once with five places left: %d made, %d refused; want 5 and 5", made, refused)
	}
	_, _, err = s.CreateKey(ctx, dev, NewKeyInput{Name: "one too many"})
	if services.ErrorCode(err) != services.CodeConflict || !strings.Contains(err.Error(), "100 live API keys") ||
		!strings.Contains(err.Error(), "Revoke") {
		t.Fatalf("key %d: %v, want a conflict that says to revoke one", MaxLiveKeys+1, err)
	}
	keys, _ := s.Keys(ctx, dev.AccountID)
	if len(keys) != MaxLiveKeys {
		t.Fatalf("%d keys stored, want %d", len(keys), MaxLiveKeys)
	}
	if err := s.RevokeKey(ctx, dev.AccountID, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateKey(ctx, dev, NewKeyInput{Name: "in the freed place"}); err != nil {
		t.Fatalf("after a revocation: %v", err)
	}
	// Another account has its own hundred.
	other, _ := s.SignUp(ctx, SignUpInput{Email: "other@example.com", Password: "long enough!", Role: RoleDeveloper})
	if _, _, err := s.CreateKey(ctx, other, NewKeyInput{Name: "mine"}); err != nil {
		t.Fatalf("another account's first key: %v", err)
	}
}

// A key's monthly limit is changed by its owner only, on a live key, and the gateway's lookup
// sees the new limit.
func TestKeyLimitCanBeChanged(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	dev, _ := s.SignUp(ctx, SignUpInput{Email: "dev@example.com", Password: "long enough!", Role: RoleDeveloper})
	other, _ := s.SignUp(ctx, SignUpInput{Email: "other@example.com", Password: "long enough!", Role: RoleDeveloper})
	five := money.Pico(5 * money.PicoPerUSD)
	k, secret, err := s.CreateKey(ctx, dev, NewKeyInput{Name: "ci", Limit: &five})
	if err != nil {
		t.Fatal(err)
	}
	raised := money.Pico(1250 * money.PicoPerCent)
	got, err := s.SetKeyLimit(ctx, dev.AccountID, k.ID, &raised, periods.Month)
	if err != nil || got.Limit == nil || *got.Limit != raised || got.ID != k.ID {
		t.Fatalf("raise to $12.50: %+v, %v", got, err)
	}
	if seen, _ := s.KeyBySecret(ctx, secret); seen.Limit == nil || *seen.Limit != raised {
		t.Fatalf("the gateway's lookup sees limit %v, want $12.50", seen.Limit)
	}
	if got, err := s.SetKeyLimit(ctx, dev.AccountID, k.ID, nil, periods.Month); err != nil || got.Limit != nil {
		t.Fatalf("remove the limit: %+v, %v", got, err)
	}
	if _, err := s.SetKeyLimit(ctx, other.AccountID, k.ID, &five, periods.Month); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("another account set the limit: %v, want not found", err)
	}
	zero := money.Pico(0)
	if _, err := s.SetKeyLimit(ctx, dev.AccountID, k.ID, &zero, periods.Month); services.ErrorCode(err) != services.CodeInvalid {
		t.Fatalf("a $0 limit: %v, want invalid", err)
	}
	if _, err := s.SetKeyLimit(ctx, dev.AccountID, "not-a-uuid", &five, periods.Month); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a malformed id: %v, want not found", err)
	}
	if seen, _ := s.KeyBySecret(ctx, secret); seen.Limit != nil {
		t.Fatalf("the refused changes left limit %v, want none", *seen.Limit)
	}
	if err := s.RevokeKey(ctx, dev.AccountID, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyLimit(ctx, dev.AccountID, k.ID, &five, periods.Month); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("a revoked key's limit: %v, want not found", err)
	}
}
