package accounts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/db/dbtest"
	"github.com/gpumarket/gpumarket/services"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func setup(t *testing.T) (*Service, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	s, err := NewService(dbtest.New(t), Config{SessionKey: []byte(strings.Repeat("k", 32)), Now: c.now,
		Hasher: PasswordHasher{MemoryKiB: 64, Time: 1, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestSignUpLoginLogout(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	u, err := s.SignUp(ctx, SignUpInput{Email: " Ada@Example.com ", Password: "correct horse", Role: RoleProvider, AccountName: "Fjord"})
	if err != nil {
		t.Fatal(err)
	}
	if u.Email != "ada@example.com" || u.Role != RoleProvider || u.AccountID == "" {
		t.Fatalf("signed up %+v", u)
	}
	sess, err := s.Login(ctx, LoginInput{Email: "ADA@example.com", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Authenticate(ctx, sess.Token)
	if err != nil || got.User.ID != u.ID || got.User.AccountID != u.AccountID {
		t.Fatalf("Authenticate = %+v, %v", got.User, err)
	}
	if err := s.Logout(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, sess.Token); services.ErrorCode(err) != services.CodeUnauthorized {
		t.Fatalf("a logged-out token authenticated: %v", err)
	}
}

func TestSignUpRefusesWhatItShould(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "a@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		in     SignUpInput
		code   services.Code
		fields []string
	}{
		{"taken email", SignUpInput{Email: "A@example.com", Password: "long enough!", Role: RoleDeveloper}, services.CodeConflict, []string{"email"}},
		{"admin role", SignUpInput{Email: "b@example.com", Password: "long enough!", Role: RoleAdmin}, services.CodeInvalid, []string{"role"}},
		{"finance role", SignUpInput{Email: "b@example.com", Password: "long enough!", Role: RoleFinance}, services.CodeInvalid, []string{"role"}},
		{"bad email and short password", SignUpInput{Email: "nope", Password: "short", Role: RoleDeveloper}, services.CodeInvalid, []string{"email", "password"}},
		{"unknown role", SignUpInput{Email: "c@example.com", Password: "long enough!", Role: "king"}, services.CodeInvalid, []string{"role"}},
	}
	for _, c := range cases {
		_, err := s.SignUp(ctx, c.in)
		var ae *services.Error
		if services.ErrorCode(err) != c.code || !errors.As(err, &ae) {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
			continue
		}
		for _, f := range c.fields {
			if ae.Fields[f] == "" {
				t.Errorf("%s: no message for field %s in %v", c.name, f, ae.Fields)
			}
		}
	}
}

func TestTokensThatMustNotAuthenticate(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	ctx := context.Background()
	if _, err := s.SignUp(ctx, SignUpInput{Email: "a@example.com", Password: "long enough!", Role: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	sess, err := s.Login(ctx, LoginInput{Email: "a@example.com", Password: "long enough!"})
	if err != nil {
		t.Fatal(err)
	}
	other := &TokenSigner{key: []byte(strings.Repeat("x", 32))}
	forged, _ := other.sign(sess.User.ID, sess.ID, c.t, c.t.Add(time.Hour))
	parts := strings.Split(sess.Token, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	for name, tok := range map[string]string{"forged": forged, "tampered": tampered, "garbage": "abc", "empty": ""} {
		if _, err := s.Authenticate(ctx, tok); services.ErrorCode(err) != services.CodeUnauthorized {
			t.Errorf("%s token: %v", name, err)
		}
	}
	c.t = c.t.Add(8 * 24 * time.Hour)
	if _, err := s.Authenticate(ctx, sess.Token); services.ErrorCode(err) != services.CodeUnauthorized {
		t.Errorf("expired token: %v", err)
	}
}

func TestOnlyAnAdminGrantsRoles(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	admin, err := s.EnsureUser(ctx, "root@example.com", "long enough!", RoleAdmin, "ops")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := s.SignUp(ctx, SignUpInput{Email: "dev@example.com", Password: "long enough!", Role: RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.GrantRole(ctx, dev, dev.ID, RoleAdmin); services.ErrorCode(err) != services.CodeForbidden {
		t.Fatalf("a developer made itself admin: %v", err)
	}
	if err := s.GrantRole(ctx, admin, dev.ID, RoleFinance); err != nil {
		t.Fatal(err)
	}
	got, _ := s.UserByID(ctx, dev.ID)
	if got.Role != RoleFinance {
		t.Fatalf("role = %s, want finance", got.Role)
	}
	var by string
	if err := s.pool.QueryRow(ctx, `SELECT granted_by FROM role_grants WHERE user_id = $1`, dev.ID).Scan(&by); err != nil || by != admin.ID {
		t.Fatalf("grant recorded by %q, %v", by, err)
	}
	if err := s.GrantRole(ctx, admin, "not-a-uuid", RoleFinance); services.ErrorCode(err) != services.CodeNotFound {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h, err := DefaultHasher.Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", h)
	}
	if ok, err := DefaultHasher.Verify("correct horse", h); !ok || err != nil {
		t.Fatalf("right password: %v %v", ok, err)
	}
	if ok, _ := DefaultHasher.Verify("correct horsE", h); ok {
		t.Fatal("wrong password verified")
	}
	if _, err := DefaultHasher.Verify("x", "$2a$10$bcrypt"); err == nil {
		t.Fatal("a foreign hash was accepted")
	}
}
