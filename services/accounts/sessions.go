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
// feeds the rate limit. AccountID, when set, is the account the session works in; without it,
// the account the login was made for (or else the first it joined).
type LoginInput struct {
	Email     string `json:"email"`
	Password  string `json:"password"`
	AccountID string `json:"account_id,omitempty"`
	ClientIP  string `json:"-"`
}

// Session is a signed-in user with the token that proves it, working in one of its accounts:
// the account in use. User.AccountID is that account and User.Role the login's role in it
// (roleIn): the platform's finance or admin, else developer or provider by the account's kind.
// Member is the login's role in the account.
type Session struct {
	ID        string     `json:"-"`
	Token     string     `json:"token"`
	ExpiresAt time.Time  `json:"expires_at"`
	User      User       `json:"user"`
	Account   Account    `json:"account"`
	Member    MemberRole `json:"member_role"`
}

// in is the session working in the membership's account.
func (sess Session) in(m Membership) Session {
	sess.Account, sess.Member = m.Account, m.Role
	sess.User.AccountID, sess.User.Role = m.Account.ID, roleIn(sess.User.Role, m.Account.Kind)
	return sess
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
	m, err := s.membershipIn(ctx, u.ID, in.AccountID)
	if err != nil {
		return Session{}, err
	}
	return s.open(ctx, u, m)
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

func (s *Service) open(ctx context.Context, u User, m Membership) (Session, error) {
	now := s.now().UTC().Truncate(time.Second)
	expires := now.Add(s.sessionTTL)
	id, err := services.NewUUID()
	if err != nil {
		return Session{}, err
	}
	if _, err := s.pool.Exec(ctx,
		`INSERT INTO sessions (id, user_id, account_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)`,
		id, u.ID, m.Account.ID, now, expires); err != nil {
		return Session{}, err
	}
	token, err := s.tokens.sign(u.ID, id, now, expires)
	if err != nil {
		return Session{}, err
	}
	return Session{ID: id, Token: token, ExpiresAt: expires, User: u}.in(m), nil
}

var errNoSession = &services.Error{Code: services.CodeUnauthorized, Message: "Log in to continue."}

// Authenticate returns the session a token proves: signed by us, unexpired, not revoked, and of
// a login that is still a member of the session's account.
func (s *Service) Authenticate(ctx context.Context, token string) (sess Session, err error) {
	now := s.now()
	userID, sessionID, err := s.tokens.parse(token, now)
	if err != nil {
		return Session{}, errNoSession
	}
	var u User
	var m Membership
	var expires time.Time
	err = s.pool.QueryRow(ctx, `
		SELECT u.id, u.email, u.role, u.created_at, u.email_verified_at, u.time_zone, s.expires_at, a.id, a.name, a.kind, m.role
		FROM sessions s JOIN users u ON u.id = s.user_id
		JOIN memberships m ON m.account_id = s.account_id AND m.user_id = s.user_id
		JOIN accounts a ON a.id = s.account_id
		WHERE s.id = $1 AND s.user_id = $2 AND s.revoked_at IS NULL AND s.expires_at > $3`,
		sessionID, userID, now).Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &u.EmailVerifiedAt, &u.TimeZone, &expires,
		&m.Account.ID, &m.Account.Name, &m.Account.Kind, &m.Role)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return Session{}, errNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("accounts.Authenticate: %w", err)
	}
	return Session{ID: sessionID, Token: token, ExpiresAt: expires, User: u}.in(m), nil
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
