package accounts

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
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
	k, secret, err := s.CreateKey(ctx, dev, NewKeyInput{Name: " ci ", MonthlyLimit: &limit, DefaultTier: "batch"})
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
	if err != nil || got.ID != k.ID || got.AccountID != dev.AccountID || *got.MonthlyLimit != limit || got.DefaultTier != "batch" {
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
