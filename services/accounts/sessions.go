package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// LoginInput is what a user gives to log in; ClientIP feeds the rate limit.
type LoginInput struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	ClientIP string `json:"-"`
}

// Session is a signed-in user with the token that proves it.
type Session struct {
	ID        string    `json:"-"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      User      `json:"user"`
}

var errBadLogin = &services.Error{Code: services.CodeUnauthorized, Message: "Wrong email or password."}

// Login checks the password and opens a session.
func (s *Service) Login(ctx context.Context, in LoginInput) (sess Session, err error) {
	defer services.Wrap(&err, "accounts.Login")
	email := normaliseEmail(in.Email)
	ipKey := ""
	if in.ClientIP != "" {
		ipKey = "ip:" + in.ClientIP
	}
	if !s.limiter.Allow("email:"+email, ipKey) {
		return Session{}, services.Errorf(services.CodeRateLimited, "Too many login attempts. Wait a minute and try again.")
	}
	var (
		u    User
		hash string
	)
	err = s.pool.QueryRow(ctx,
		`SELECT id, account_id, email, role, created_at, password_hash FROM users WHERE email = $1`, email).
		Scan(&u.ID, &u.AccountID, &u.Email, &u.Role, &u.CreatedAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		// Spend the same time as a real check so that response times do not reveal which
		// emails are registered.
		_, _ = s.hasher.Verify(in.Password, dummyHash)
		return Session{}, errBadLogin
	}
	if err != nil {
		return Session{}, err
	}
	ok, err := s.hasher.Verify(in.Password, hash)
	if err != nil {
		return Session{}, err
	}
	if !ok {
		return Session{}, errBadLogin
	}
	return s.open(ctx, u)
}

func (s *Service) open(ctx context.Context, u User) (Session, error) {
	now := s.now().UTC().Truncate(time.Second)
	expires := now.Add(s.sessionTTL)
	id, err := services.NewUUID()
	if err != nil {
		return Session{}, err
	}
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO sessions (id, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		id, u.ID, now, expires); err != nil {
		return Session{}, err
	}
	token, err := s.tokens.sign(u.ID, id, now, expires)
	if err != nil {
		return Session{}, err
	}
	return Session{ID: id, Token: token, ExpiresAt: expires, User: u}, nil
}

var errNoSession = &services.Error{Code: services.CodeUnauthorized, Message: "Log in to continue."}

// Authenticate returns the session a token proves: signed by us, unexpired, not revoked.
func (s *Service) Authenticate(ctx context.Context, token string) (sess Session, err error) {
	now := s.now()
	userID, sessionID, err := s.tokens.parse(token, now)
	if err != nil {
		return Session{}, errNoSession
	}
	var u User
	var expires time.Time
	err = s.pool.QueryRow(ctx, `
		SELECT u.id, u.account_id, u.email, u.role, u.created_at, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL AND s.expires_at > $3`,
		sessionID, userID, now).Scan(&u.ID, &u.AccountID, &u.Email, &u.Role, &u.CreatedAt, &expires)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return Session{}, errNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("accounts.Authenticate: %w", err)
	}
	return Session{ID: sessionID, Token: token, ExpiresAt: expires, User: u}, nil
}

// Logout revokes the session; its token is refused from then on.
func (s *Service) Logout(ctx context.Context, sessionID string) (err error) {
	defer services.Wrap(&err, "accounts.Logout")
	_, err = s.pool.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`,
		sessionID, s.now().UTC())
	if isInvalidText(err) {
		return nil
	}
	return err
}

// dummyHash is checked against when the email is unknown, so both paths cost one hash.
var dummyHash, _ = DefaultHasher.Hash("gpumarket-timing-equaliser")
