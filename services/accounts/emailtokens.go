package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/mail"
)

// The single-use links e-mailed to a user (user_tokens): a password reset, and the proof of the
// address given at sign-up. The link carries a random token; the table keeps only its SHA-256, so
// a copy of the table opens nothing. A link works once and until it expires (docs/email.md).

// Outbox queues e-mail in the caller's transaction (mail.Outbox).
type Outbox interface {
	Enqueue(ctx context.Context, tx pgx.Tx, m mail.Message) error
}

// How long each kind of link works.
const (
	PasswordResetTTL = time.Hour
	VerifyEmailTTL   = 7 * 24 * time.Hour
)

type tokenPurpose string

const (
	purposePasswordReset tokenPurpose = "password_reset"
	purposeVerifyEmail   tokenPurpose = "verify_email"
)

var errBadLink = services.Errorf(services.CodeNotFound,
	"This link has expired or was already used. Ask for a new one.")

var errNoMail = services.Errorf(services.CodeUnavailable, "E-mail is not available on this server.")

// newToken is a random token for a link and the hash the table keeps of it.
func newToken() (token string, hash []byte, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, hashToken(token), nil
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// issueToken stores a token for the user and queues the e-mail carrying its link, in tx.
func (s *Service) issueToken(ctx context.Context, tx pgx.Tx, u User, purpose tokenPurpose, ttl time.Duration,
	message func(link string) mail.Message) error {
	token, hash, err := newToken()
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if _, err := tx.Exec(ctx, `
		INSERT INTO user_tokens (token_hash, user_id, purpose, email, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, hash, u.ID, string(purpose), u.Email, now, now.Add(ttl)); err != nil {
		return err
	}
	path := "/reset-password"
	if purpose == purposeVerifyEmail {
		path = "/verify-email"
	}
	m := message(s.siteURL() + path + "?token=" + url.QueryEscape(token))
	m.Key, m.To = string(purpose)+":"+hex.EncodeToString(hash), []string{u.Email}
	return s.outbox.Enqueue(ctx, tx, m)
}

// useToken spends a token of the purpose in tx: it must exist, be unused and unexpired. It
// returns the user it was issued to and the address it was sent to.
func (s *Service) useToken(ctx context.Context, tx pgx.Tx, token string, purpose tokenPurpose) (userID, email string, err error) {
	if token == "" || len(token) > 100 {
		return "", "", errBadLink
	}
	now := s.now().UTC()
	err = tx.QueryRow(ctx, `
		UPDATE user_tokens SET used_at = $3
		WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3
		RETURNING user_id, email`, hashToken(token), string(purpose), now).Scan(&userID, &email)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", errBadLink
	}
	return userID, email, err
}

// RequestPasswordReset e-mails a link to set a new password to the address, if a user has it. It
// answers the same whether or not one does, so that it tells no one which addresses have
// accounts; requests are counted against the client's address as sign-ups are.
func (s *Service) RequestPasswordReset(ctx context.Context, email, clientIP string) (err error) {
	defer services.Wrap(&err, "accounts.RequestPasswordReset")
	if s.outbox == nil {
		return errNoMail
	}
	email = normaliseEmail(email)
	if msg := validateEmail(email); msg != "" {
		return &services.Error{Code: services.CodeInvalid, Message: msg, Fields: map[string]string{"email": msg}}
	}
	if !s.limiter.take(resetCharges(clientIP)...) {
		return services.Errorf(services.CodeRateLimited, "Too many requests from your network. Wait a few minutes and try again.")
	}
	u, err := s.UserByEmail(ctx, email)
	if services.ErrorCode(err) == services.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.issueToken(ctx, tx, u, purposePasswordReset, PasswordResetTTL, func(link string) mail.Message {
			return mail.Message{
				Subject: "Set a new password for GPU Market",
				Text: fmt.Sprintf("Someone, hopefully you, asked to set a new password for %s on GPU Market.\n\n"+
					"Follow this link within an hour to choose one:\n\n%s\n\n"+
					"The link works once. Setting a new password logs out everywhere else.\n"+
					"If you did not ask, ignore this e-mail: your password stays as it is.\n", u.Email, link),
			}
		})
	})
}

// PasswordResetValid says whether a reset link can still be used, for the page that asks for the
// new password; it spends nothing.
func (s *Service) PasswordResetValid(ctx context.Context, token string) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM user_tokens
			WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3)`,
		hashToken(token), string(purposePasswordReset), s.now().UTC()).Scan(&ok)
	if err != nil {
		return fmt.Errorf("accounts.PasswordResetValid: %w", err)
	}
	if !ok {
		return errBadLink
	}
	return nil
}

// ResetPassword sets a new password with a reset link's token, which is spent; every session of
// the user is revoked and a new one opened for this browser. Following the link also proves the
// address it was sent to.
func (s *Service) ResetPassword(ctx context.Context, token, password string) (sess Session, err error) {
	defer services.Wrap(&err, "accounts.ResetPassword")
	if msg := passwordProblem(password); msg != "" {
		return Session{}, &services.Error{Code: services.CodeInvalid, Message: msg, Fields: map[string]string{"password": msg}}
	}
	var hash string
	if gateErr := s.hashes.run(ctx, func() { hash, err = s.hasher.Hash(password) }); gateErr != nil {
		return Session{}, gateErr
	}
	if err != nil {
		return Session{}, err
	}
	var userID string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, email, err := s.useToken(ctx, tx, token, purposePasswordReset)
		if err != nil {
			return err
		}
		userID = id
		now := s.now().UTC()
		if _, err := tx.Exec(ctx, `
			UPDATE users SET password_hash = $2,
				email_verified_at = CASE WHEN email = $3 THEN coalesce(email_verified_at, $4) ELSE email_verified_at END
			WHERE id = $1`, id, hash, email, now); err != nil {
			return err
		}
		// Other links to reset the password die with the old password.
		if _, err := tx.Exec(ctx, `UPDATE user_tokens SET used_at = $3 WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL`,
			id, string(purposePasswordReset), now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL`, id, now)
		return err
	})
	if err != nil {
		return Session{}, err
	}
	u, err := s.UserByID(ctx, userID)
	if err != nil {
		return Session{}, err
	}
	m, err := s.membershipIn(ctx, u.ID, "")
	if err != nil {
		return Session{}, err
	}
	return s.open(ctx, u, m)
}

// sendVerification queues the e-mail whose link proves the user's address, in tx.
func (s *Service) sendVerification(ctx context.Context, tx pgx.Tx, u User) error {
	return s.issueToken(ctx, tx, u, purposeVerifyEmail, VerifyEmailTTL, func(link string) mail.Message {
		return mail.Message{
			Subject: "Confirm your e-mail address for GPU Market",
			Text: fmt.Sprintf("Welcome to GPU Market.\n\nFollow this link to confirm that %s is your address:\n\n%s\n\n"+
				"Invoices and notices about your account go to it. The link works for a week.\n"+
				"If you did not sign up, ignore this e-mail.\n", u.Email, link),
		}
	})
}

// ResendVerification e-mails the user a new link to prove their address, unless it is proven.
func (s *Service) ResendVerification(ctx context.Context, userID string) (err error) {
	defer services.Wrap(&err, "accounts.ResendVerification")
	if s.outbox == nil {
		return errNoMail
	}
	u, err := s.UserByID(ctx, userID)
	if err != nil || u.EmailVerifiedAt != nil {
		return err
	}
	if !s.limiter.take(charge{key: "verify\x00" + userID, budget: resetBudget}) {
		return services.Errorf(services.CodeRateLimited, "We sent several links already. Wait a few minutes and try again.")
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.sendVerification(ctx, tx, u) })
}

// VerifyEmail spends a verification link's token and records the address proven, when it is still
// the user's address.
func (s *Service) VerifyEmail(ctx context.Context, token string) (u User, err error) {
	defer services.Wrap(&err, "accounts.VerifyEmail")
	var userID string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		id, email, err := s.useToken(ctx, tx, token, purposeVerifyEmail)
		if err != nil {
			return err
		}
		userID = id
		tag, err := tx.Exec(ctx, `UPDATE users SET email_verified_at = coalesce(email_verified_at, $3) WHERE id = $1 AND email = $2`,
			id, email, s.now().UTC())
		if err == nil && tag.RowsAffected() == 0 {
			return errBadLink
		}
		return err
	})
	if err != nil {
		return User{}, err
	}
	return s.UserByID(ctx, userID)
}

func (s *Service) siteURL() string {
	if s.site == nil {
		return ""
	}
	return s.site()
}
