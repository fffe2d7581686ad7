package web_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/demo"
)

type membersJSON struct {
	Members []accounts.Member `json:"members"`
	Count   int               `json:"count"`
}

type invitationsJSON struct {
	Invitations []accounts.Invitation `json:"invitations"`
	Count       int                   `json:"count"`
}

// acceptInvite accepts the invitation e-mailed to email with a password, as its link's page
// does, and returns the new member's bearer token.
func acceptInvite(t *testing.T, e *env, email string) string {
	t.Helper()
	token := strings.TrimPrefix(e.mail.inviteLink(t, email), accounts.InvitationPath)
	if _, err := e.accounts.AcceptInvitation(context.Background(), accounts.AcceptInput{Token: token, Password: demo.Password}); err != nil {
		t.Fatal(err)
	}
	return e.token(t, email, demo.Password)
}

// The members API does what the members page does: invite, list and revoke invitations,
// change a role, remove a member revoking or passing on their keys, under the same rules.
func TestAPIMembersAndInvitations(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	owner := e.token(t, "developer@example.com", demo.Password)
	dev, _ := e.accounts.UserByEmail(ctx, "developer@example.com")

	// An invitation, then its revocation.
	var inv accounts.Invitation
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/account/invitations",
		map[string]string{"email": "Withdrawn@Example.com", "role": "billing"}, &inv), http.StatusCreated)
	if inv.Email != "withdrawn@example.com" || inv.Role != accounts.MemberBilling || inv.InvitedBy != "developer@example.com" {
		t.Fatalf("invitation %+v", inv)
	}
	if msg := e.mail.to(t, "withdrawn@example.com"); msg.Key != "invite:"+inv.ID {
		t.Fatalf("the invitation's e-mail is keyed %q, want invite:%s", msg.Key, inv.ID)
	}
	var invs invitationsJSON
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/account/invitations", nil, &invs), http.StatusOK)
	if invs.Count != 1 || invs.Invitations[0].ID != inv.ID {
		t.Fatalf("pending invitations %+v", invs)
	}
	wantStatus(t, e.call(t, owner, http.MethodDelete, "/api/account/invitations/"+inv.ID, nil, nil), http.StatusNoContent)
	wantStatus(t, e.call(t, owner, http.MethodDelete, "/api/account/invitations/"+inv.ID, nil, nil), http.StatusNotFound)
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/account/invitations", nil, &invs), http.StatusOK)
	if invs.Count != 0 {
		t.Fatalf("after revoking: %+v", invs)
	}
	var bad apiErrorJSON
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/account/invitations",
		map[string]string{"email": "not-an-email", "role": "emperor"}, &bad), http.StatusUnprocessableEntity)
	wantFields(t, bad, "email", "role")

	// Two people join as developers and make a key each.
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/account/invitations",
		map[string]string{"email": "api-leaver@example.com", "role": "developer"}, nil), http.StatusCreated)
	wantStatus(t, e.call(t, owner, http.MethodPost, "/api/account/invitations",
		map[string]string{"email": "api-stayer@example.com", "role": "developer"}, nil), http.StatusCreated)
	leaverToken, stayerToken := acceptInvite(t, e, "api-leaver@example.com"), acceptInvite(t, e, "api-stayer@example.com")
	newKey := func(token string) string {
		var k keyJSON
		wantStatus(t, e.call(t, token, http.MethodPost, "/api/keys", map[string]any{"name": "mine"}, &k), http.StatusCreated)
		return k.ID
	}
	leaverKey, stayerKey := newKey(leaverToken), newKey(stayerToken)

	var ms membersJSON
	wantStatus(t, e.call(t, stayerToken, http.MethodGet, "/api/account/members", nil, &ms), http.StatusOK)
	if ms.Count != 3 || ms.Members[0].UserID != dev.ID || ms.Members[0].Role != accounts.MemberOwner {
		t.Fatalf("members as a developer sees them: %+v", ms)
	}
	var leaver, stayer accounts.Member
	for _, m := range ms.Members {
		switch m.Email {
		case "api-leaver@example.com":
			leaver = m
		case "api-stayer@example.com":
			stayer = m
		}
	}
	// A developer changes nothing and sees no invitations.
	wantStatus(t, e.call(t, stayerToken, http.MethodPatch, "/api/account/members/"+leaver.UserID,
		map[string]string{"role": "admin"}, nil), http.StatusForbidden)
	wantStatus(t, e.call(t, stayerToken, http.MethodGet, "/api/account/invitations", nil, nil), http.StatusForbidden)

	// The stayer becomes an admin, who may change members but not make an owner.
	var m accounts.Member
	wantStatus(t, e.call(t, owner, http.MethodPatch, "/api/account/members/"+stayer.UserID,
		map[string]string{"role": "admin"}, &m), http.StatusOK)
	if m.UserID != stayer.UserID || m.Role != accounts.MemberAdmin {
		t.Fatalf("after the change: %+v", m)
	}
	wantStatus(t, e.call(t, stayerToken, http.MethodPatch, "/api/account/members/"+leaver.UserID,
		map[string]string{"role": "owner"}, nil), http.StatusForbidden)
	bad = apiErrorJSON{}
	wantStatus(t, e.call(t, owner, http.MethodPatch, "/api/account/members/"+leaver.UserID,
		map[string]string{"role": "emperor"}, &bad), http.StatusUnprocessableEntity)
	wantFields(t, bad, "role")
	// The last owner cannot step down.
	wantStatus(t, e.call(t, owner, http.MethodPatch, "/api/account/members/"+dev.ID,
		map[string]string{"role": "admin"}, nil), http.StatusConflict)

	// The admin removes the leaver, passing their key to the stayer: it stays live.
	var removed struct {
		Removed     string   `json:"removed"`
		RevokedKeys []string `json:"revoked_keys"`
	}
	wantStatus(t, e.call(t, stayerToken, http.MethodDelete, "/api/account/members/"+leaver.UserID+"?keys_transfer="+stayer.UserID,
		nil, &removed), http.StatusOK)
	if removed.Removed != leaver.UserID || len(removed.RevokedKeys) != 0 {
		t.Fatalf("removed with a transfer: %+v", removed)
	}
	wantStatus(t, e.call(t, leaverToken, http.MethodGet, "/api/keys", nil, nil), http.StatusUnauthorized)
	if n, _ := e.accounts.LiveKeysCreatedBy(ctx, dev.AccountID, stayer.UserID); n != 2 {
		t.Fatalf("the stayer holds %d live keys, want their own and the leaver's", n)
	}
	// The owner removes the stayer, revoking their keys.
	wantStatus(t, e.call(t, owner, http.MethodDelete, "/api/account/members/"+stayer.UserID, nil, &removed), http.StatusOK)
	slices.Sort(removed.RevokedKeys)
	want := []string{leaverKey, stayerKey}
	slices.Sort(want)
	if !slices.Equal(removed.RevokedKeys, want) {
		t.Fatalf("revoked %v, want %v", removed.RevokedKeys, want)
	}
	wantStatus(t, e.call(t, owner, http.MethodDelete, "/api/account/members/"+stayer.UserID, nil, nil), http.StatusNotFound)
	wantStatus(t, e.call(t, owner, http.MethodGet, "/api/account/members", nil, &ms), http.StatusOK)
	if ms.Count != 1 {
		t.Fatalf("members after both left: %+v", ms)
	}
}

// A browser's session cookie calls the members API only with the page's CSRF token, as a
// form does; a bearer token needs none.
func TestAPIMembersCSRF(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b, csrf := loginBrowser(t, e, "developer@example.com")
	send := func(withToken bool) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/account/invitations",
			bytes.NewReader([]byte(`{"email": "csrf-invitee@example.com", "role": "read-only"}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if withToken {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		res, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := send(false); got != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d, want 403", got)
	}
	if n := countRows(t, e, `SELECT count(*) FROM invitations WHERE email = 'csrf-invitee@example.com'`); n != 0 {
		t.Fatalf("a refused call made %d invitations", n)
	}
	if got := send(true); got != http.StatusCreated {
		t.Fatalf("with the CSRF token: %d, want 201", got)
	}
}
