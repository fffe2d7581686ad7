package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// LoginInput is what a user gives to log in; ClientIP, the address the attempt came from,
// feeds the rate limit.
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

// Login checks the password and opens a session. Each attempt is counted against the account
// at the client's address and against the address alone (see limiter.go); a successful login
// gives its token back, so only failures are counted.
func (s *Service) Login(ctx context.Context, in LoginInput) (sess Session, err error) {
	defer services.Wrap(&err, "accounts.Login")
	email := normaliseEmail(in.Email)
	charges := loginCharges(email, in.ClientIP)
	if !s.limiter.take(charges...) {
		return Session{}, services.Errorf(services.CodeRateLimited, "Too many failed logins. Wait a minute and try again.")
	}
	u, err := s.checkPassword(ctx, email, in.Password)
	if err != errBadLogin {
		s.limiter.give(charges...) // a success, or a failure of ours: not a guess
	}
	if err != nil {
		return Session{}, err
	}
	return s.open(ctx, u)
}

// checkPassword returns the user whose email and password these are, errBadLogin when they
// are not, or errBusy when no hashing slot came free.
func (s *Service) checkPassword(ctx context.Context, email, password string) (User, error) {
	var (
		u    User
		hash string
	)
	err := s.pool.QueryRow(ctx,
		`SELECT `+userColumns+`, password_hash FROM users WHERE email = $1`, email).
		Scan(append(userTargets(&u), &hash)...)
	known := err == nil
	if errors.Is(err, pgx.ErrNoRows) {
		// Spend the same time as a real check so that response times do not reveal which
		// emails are registered.
		hash = s.dummyHash
	} else if err != nil {
		return User{}, err
	}
	var ok bool
	if gateErr := s.hashes.run(ctx, func() { ok, err = s.hasher.Verify(password, hash) }); gateErr != nil {
		return User{}, gateErr
	}
	if err != nil {
		return User{}, err
	}
	if !ok || !known {
		return User{}, errBadLogin
	}
	return u, nil
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
		SELECT u.id, u.account_id, u.email, u.role, u.created_at, u.email_verified_at, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL AND s.expires_at > $3`,
		sessionID, userID, now).Scan(append(userTargets(&u), &expires)...)
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
