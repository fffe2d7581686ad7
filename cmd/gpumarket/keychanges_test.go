package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/mail"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/credits"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/ledger"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/simulation"
	"github.com/gpumarket/gpumarket/web/gateway"
)

// call sends a JSON request with a bearer token and returns the status and body.
func call(t *testing.T, method, url, bearer string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// within polls until ok or the limit passes, and returns how long it took.
func within(t *testing.T, limit time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// The attack: a key is revoked because it leaked, and the thief keeps calling another gateway
// process, whose cache holds the key for gateway.DefaultKeyCacheTTL (5 s). Two gateway processes
// share one NATS server and one database: the key revoked through the first is refused by the
// second within a second. A key's new monthly limit reaches the second the same way.
func TestKeyChangesReachEveryGatewayWithinASecond(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := natstest.Start(t, natsserver.EmbeddedOptions{})

	cfgA := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
	cfgA.NATSURL = ns.ClientURL()
	a := runPlatform(t, cfgA)
	if err := a.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	cfgB := cfgA
	cfgB.Roles, cfgB.DataDir = Roles{Web: true, Gateway: true}, t.TempDir()
	b := runPlatform(t, cfgB)

	// A developer with credit and two keys; its session is on the first process.
	dev, err := a.accounts.SignUp(ctx, accounts.SignUpInput{Email: "keys@changes.example.com", Password: demo.Password,
		Role: accounts.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := a.accounts.UserByEmail(ctx, "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := credits.NewCredits(a.pool, ledger.NewLedger(a.pool, nil), nil, nil).Adjust(ctx,
		credits.AdjustInput{AccountID: dev.AccountID, Amount: 20 * money.PicoPerUSD, Reason: "key changes test", ByUserID: admin.ID}); err != nil {
		t.Fatal(err)
	}
	sess, err := a.accounts.Login(ctx, loginAs("keys@changes.example.com"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a revoked key", func(t *testing.T) {
		key, secret, err := a.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "leaked"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // the second process now has the key in its cache
			if st, body := call(t, http.MethodGet, b.URL()+"/v1/models", secret, nil); st != http.StatusOK {
				t.Fatalf("call %d on the second gateway with the live key: %d %s", i+1, st, body)
			}
		}
		if st, body := call(t, http.MethodDelete, a.URL()+"/api/keys/"+key.ID, sess.Token, nil); st != http.StatusNoContent {
			t.Fatalf("revoking on the first process: %d %s", st, body)
		}
		took := within(t, time.Second, "the second gateway refuses the revoked key", func() bool {
			st, _ := call(t, http.MethodGet, b.URL()+"/v1/models", secret, nil)
			return st == http.StatusUnauthorized
		})
		t.Logf("the second gateway refused the revoked key %v after the revocation (its cache keeps keys %v)", took, gateway.DefaultKeyCacheTTL)
		if st, _ := call(t, http.MethodGet, a.URL()+"/v1/models", secret, nil); st != http.StatusUnauthorized {
			t.Errorf("the first gateway answers the revoked key %d, want 401", st)
		}
	})

	// A member is removed from the account through the members page of the first process: the key
	// they created there is refused by the second gateway within a second (docs/members.md).
	t.Run("a removed member's key", func(t *testing.T) {
		mailed := &invitationMail{}
		inviter, err := accounts.NewService(a.pool, accounts.Config{SessionKey: []byte(strings.Repeat("i", 32)), Outbox: mailed})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inviter.Invite(ctx, sess, accounts.InviteInput{Email: "member@changes.example.com",
			Role: accounts.MemberDeveloper}); err != nil {
			t.Fatal(err)
		}
		if _, err := inviter.AcceptInvitation(ctx, accounts.AcceptInput{Token: mailed.token, Password: demo.Password}); err != nil {
			t.Fatal(err)
		}
		member, err := a.accounts.Login(ctx, loginAs("member@changes.example.com"))
		if err != nil || member.Account.ID != dev.AccountID {
			t.Fatalf("the member's session: %+v, %v", member.Account, err)
		}
		_, secret, err := a.accounts.CreateKey(ctx, member.User, accounts.NewKeyInput{Name: "the member's"})
		if err != nil {
			t.Fatal(err)
		}
		if st, body := call(t, http.MethodGet, b.URL()+"/v1/models", secret, nil); st != http.StatusOK {
			t.Fatalf("the second gateway with the member's key: %d %s", st, body)
		}
		owner := newPageClient(t, a.URL(), "keys@changes.example.com")
		if code, loc := owner.confirmed("/account/members/"+member.User.ID+"/remove", url.Values{}); code != http.StatusSeeOther ||
			!strings.Contains(loc, "member-removed") {
			t.Fatalf("removing the member: %d to %q", code, loc)
		}
		took := within(t, time.Second, "the second gateway refuses the removed member's key", func() bool {
			st, _ := call(t, http.MethodGet, b.URL()+"/v1/models", secret, nil)
			return st == http.StatusUnauthorized
		})
		t.Logf("the second gateway refused the removed member's key %v after the removal", took)
		if st, _ := call(t, http.MethodGet, a.URL()+"/api/keys", member.Token, nil); st != http.StatusUnauthorized {
			t.Errorf("the removed member's session answers %d, want 401", st)
		}
	})

	t.Run("a raised monthly limit", func(t *testing.T) {
		o := listServedOffering(t, a, b)
		half := money.Pico(50 * money.PicoPerCent)
		key, secret, err := a.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "capped", Limit: &half})
		if err != nil {
			t.Fatal(err)
		}
		// The key has spent $1.00 this month: over its $0.50 limit.
		month := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
		if _, err := a.pool.Exec(ctx, `INSERT INTO api_key_spend (api_key_id, month, requests, charge_pico) VALUES ($1, $2, 1, $3)`,
			key.ID, month, int64(money.PicoPerUSD)); err != nil {
			t.Fatal(err)
		}
		chat := map[string]any{"model": o.Model, "max_tokens": 4, "messages": []any{map[string]string{"role": "user", "content": "hi"}}}
		if st, body := call(t, http.MethodPost, b.URL()+"/v1/chat/completions", secret, chat); st != http.StatusPaymentRequired ||
			!strings.Contains(body, "monthly spending limit") {
			t.Fatalf("the second gateway with the key over its limit: %d %s, want 402", st, body)
		}
		if st, body := call(t, http.MethodPatch, a.URL()+"/api/keys/"+key.ID, sess.Token, map[string]any{"limit_usd": "5.00"}); st != http.StatusOK {
			t.Fatalf("raising the limit on the first process: %d %s", st, body)
		}
		took := within(t, time.Second, "the second gateway applies the raised limit", func() bool {
			st, _ := call(t, http.MethodPost, b.URL()+"/v1/chat/completions", secret, chat)
			return st == http.StatusOK
		})
		t.Logf("the second gateway served the key %v after its limit went from $0.50 to $5.00", took)
	})
}

// invitationMail keeps the token of the last invitation it is given.
type invitationMail struct{ token string }

func (m *invitationMail) Enqueue(_ context.Context, _ pgx.Tx, msg mail.Message) error {
	i := strings.Index(msg.Text, accounts.InvitationPath)
	m.token = strings.Fields(msg.Text[i+len(accounts.InvitationPath):])[0]
	return nil
}

// listServedOffering lists a standard offering served by a simulated rig and waits until both
// gateways can route to it.
func listServedOffering(t *testing.T, a, b *Platform) catalog.Offering {
	t.Helper()
	ctx := context.Background()
	provider, err := a.accounts.UserByEmail(ctx, "provider@example.com")
	if err != nil {
		t.Fatal(err)
	}
	p50, p99, tps := 150.0, 300.0, 1000.0
	o, err := a.catalog.Create(ctx, provider.AccountID, catalog.ListingInput{GPU: "rtx-4090", GPUCount: 4, Region: "eu",
		Model: "keychanges-model", AskInput: 66_667, AskOutput: 133_333,
		ClaimedTTFTP50Ms: &p50, ClaimedTTFTP99Ms: &p99, ClaimedTokensPerSec: &tps})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.catalog.MarkQualified(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	profile := simulation.Zero()
	profile.Model = o.Model
	rig, err := a.startRig(ctx, o.ID, provider.AccountID, o.GPU, o.GPUCount, profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.stop)
	for _, p := range []*Platform{a, b} {
		if err := p.router.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		within(t, 20*time.Second, "routing can send the rig requests", func() bool {
			_, err := p.router.Pick(routing.Request{Model: o.Model, Tier: o.Tier, Offering: o.ID})
			return err == nil
		})
	}
	return o
}
