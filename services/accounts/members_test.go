package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	gpumail "github.com/gpumarket/gpumarket/services/mail"
)

// outboxInTx is the tests' outbox: it records each message in a table of the transaction it is
// queued in, so that a message is kept only when what it tells of was committed.
type outboxInTx struct{}

func (outboxInTx) Enqueue(ctx context.Context, tx pgx.Tx, m gpumail.Message) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS test_outbox (key text PRIMARY KEY, recipient text, body text)`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO test_outbox (key, recipient, body) VALUES ($1, $2, $3)`, m.Key, m.To[0], m.Text)
	return err
}

// linkTo is the token of the invitation link in the message queued to the email.
func linkTo(t *testing.T, s *Service, email string) string {
	t.Helper()
	var body string
	if err := s.pool.QueryRow(context.Background(), `SELECT body FROM test_outbox WHERE recipient = $1`, email).Scan(&body); err != nil {
		t.Fatalf("no e-mail to %s: %v", email, err)
	}
	i := strings.Index(body, InvitationPath)
	return strings.Fields(body[i+len(InvitationPath):])[0]
}

// team signs up an owner of a customer's account and brings in members of the roles by
// invitation, and returns each one's session, by email.
func team(t *testing.T, s *Service, roles map[string]MemberRole) map[string]Session {
	t.Helper()
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "owner@example.com", Password: "owner-password", Role: RoleDeveloper,
		AccountName: "Acme"}); err != nil {
		t.Fatal(err)
	}
	owner, err := s.Login(ctx, LoginInput{Email: "owner@example.com", Password: "owner-password"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Session{"owner@example.com": owner}
	for email, role := range roles {
		if _, err := s.Invite(ctx, owner, InviteInput{Email: email, Role: role, LinkBase: "https://gpumarket.test"}); err != nil {
			t.Fatal(err)
		}
		if out[email], err = s.AcceptInvitation(ctx, AcceptInput{Token: linkTo(t, s, email), Password: "member-password"}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestWhoMayChangeAMember(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	s.outbox = outboxInTx{}
	ctx := context.Background()
	sess := team(t, s, map[string]MemberRole{"admin@example.com": MemberAdmin, "dev@example.com": MemberDeveloper,
		"viewer@example.com": MemberReadOnly})
	owner, adm, dev, viewer := sess["owner@example.com"], sess["admin@example.com"], sess["dev@example.com"], sess["viewer@example.com"]
	if dev.Member != MemberDeveloper || dev.Account.ID != owner.Account.ID || dev.User.Role != RoleDeveloper {
		t.Fatalf("the developer's session: %+v", dev)
	}

	for _, c := range []struct {
		name string
		err  error
		want services.Code
	}{
		{"a developer invites", func() error {
			_, err := s.Invite(ctx, dev, InviteInput{Email: "x@example.com", Role: MemberReadOnly})
			return err
		}(), services.CodeForbidden},
		{"an admin invites an owner", func() error {
			_, err := s.Invite(ctx, adm, InviteInput{Email: "x@example.com", Role: MemberOwner})
			return err
		}(), services.CodeForbidden},
		{"an admin invites a member", func() error {
			_, err := s.Invite(ctx, adm, InviteInput{Email: "viewer@example.com", Role: MemberBilling})
			return err
		}(), services.CodeConflict}, // already a member
		{"a read-only member changes a role", s.SetMemberRole(ctx, viewer, dev.User.ID, MemberAdmin), services.CodeForbidden},
		{"an admin demotes the owner", s.SetMemberRole(ctx, adm, owner.User.ID, MemberAdmin), services.CodeForbidden},
		{"the last owner steps down", s.SetMemberRole(ctx, owner, owner.User.ID, MemberAdmin), services.CodeConflict},
		{"an admin removes the owner", func() error {
			_, err := s.RemoveMember(ctx, adm, RemoveMemberInput{UserID: owner.User.ID})
			return err
		}(), services.CodeForbidden},
		{"the last owner leaves", func() error {
			_, err := s.RemoveMember(ctx, owner, RemoveMemberInput{UserID: owner.User.ID})
			return err
		}(), services.CodeConflict},
		{"keys passed to no member", func() error {
			_, err := s.RemoveMember(ctx, owner, RemoveMemberInput{UserID: dev.User.ID, KeysTransfer: "00000000-0000-4000-8000-000000000000"})
			return err
		}(), services.CodeInvalid},
		{"a member of another account", s.SetMemberRole(ctx, owner, "00000000-0000-4000-8000-000000000000", MemberAdmin), services.CodeNotFound},
		{"an admin makes the developer billing", s.SetMemberRole(ctx, adm, dev.User.ID, MemberBilling), ""},
	} {
		if got := services.ErrorCode(c.err); got != c.want {
			t.Errorf("%s: %v, want code %q", c.name, c.err, c.want)
		}
	}

	// An owner makes a second owner, who may then let the first one go.
	if err := s.SetMemberRole(ctx, owner, adm.User.ID, MemberOwner); err != nil {
		t.Fatal(err)
	}
	adm.Member = MemberOwner
	if _, err := s.RemoveMember(ctx, adm, RemoveMemberInput{UserID: owner.User.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, owner.Token); services.ErrorCode(err) != services.CodeUnauthorized {
		t.Fatalf("the removed owner's session: %v, want refused", err)
	}
	members, err := s.Members(ctx, adm.Account.ID)
	if err != nil || len(members) != 3 {
		t.Fatalf("members: %+v, %v", members, err)
	}
}

func TestAnInvitationIsUsedOnce(t *testing.T) {
	t.Parallel()
	s, clk := setup(t)
	ctx := context.Background()
	sess := team(t, s, nil)
	owner := sess["owner@example.com"]
	// Without an outbox there is no invitation.
	if _, err := s.Invite(ctx, owner, InviteInput{Email: "a@example.com", Role: MemberBilling}); services.ErrorCode(err) != services.CodeUnavailable {
		t.Fatalf("invite without an outbox: %v", err)
	}
	s.outbox = outboxInTx{}
	inv, err := s.Invite(ctx, owner, InviteInput{Email: "A@Example.com", Role: MemberBilling, LinkBase: "https://gpumarket.test"})
	if err != nil {
		t.Fatal(err)
	}
	token := linkTo(t, s, "a@example.com")
	var stored []byte
	if err := s.pool.QueryRow(ctx, `SELECT token_hash FROM invitations WHERE id = $1`, inv.ID).Scan(&stored); err != nil ||
		strings.Contains(string(stored), token) || len(stored) != 32 {
		t.Fatalf("the stored token is %x (%v): want its SHA-256 only", stored, err)
	}
	var key string
	if err := s.pool.QueryRow(ctx, `SELECT key FROM test_outbox WHERE recipient = 'a@example.com'`).Scan(&key); err != nil || key != "invite:"+inv.ID {
		t.Fatalf("e-mail key %q, %v", key, err)
	}

	clk.t = clk.t.Add(InvitationTTL - 1)
	joined, err := s.AcceptInvitation(ctx, AcceptInput{Token: token, Password: "new-login-password"})
	if err != nil || joined.Member != MemberBilling || joined.Account.ID != owner.Account.ID {
		t.Fatalf("accept: %+v, %v", joined, err)
	}
	if _, err := s.AcceptInvitation(ctx, AcceptInput{Token: token, Password: "new-login-password"}); !errors.Is(err, errInvitationUsed) {
		t.Fatalf("accepted twice: %v", err)
	}

	if _, err := s.Invite(ctx, owner, InviteInput{Email: "late@example.com", Role: MemberBilling}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(InvitationTTL)
	if _, err := s.AcceptInvitation(ctx, AcceptInput{Token: linkTo(t, s, "late@example.com"), Password: "late-password-1"}); !errors.Is(err, errInvitationExpired) {
		t.Fatalf("an expired invitation: %v", err)
	}
}
