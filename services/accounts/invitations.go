package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	gpumail "github.com/gpumarket/gpumarket/services/mail"
)

// InvitationTTL is how long an invitation's link works.
const InvitationTTL = 7 * 24 * time.Hour

// Invitation is an offer, sent by e-mail, to join an account with a role.
type Invitation struct {
	ID          string     `json:"id"`
	AccountID   string     `json:"account_id"`
	AccountName string     `json:"account_name"`
	Email       string     `json:"email"`
	Role        MemberRole `json:"role"`
	InvitedBy   string     `json:"invited_by"` // the inviter's email
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	// HasLogin says the invited email already has a login: accepting signs it in rather than
	// making one.
	HasLogin bool `json:"-"`
}

// InviteInput is who to invite to the account in use, with which role; LinkBase is the site's
// address the link in the e-mail starts with.
type InviteInput struct {
	Email    string
	Role     MemberRole
	LinkBase string
}

// Validate checks the input and normalises the email.
func (in *InviteInput) Validate() error {
	fe := services.FieldErrors{}
	in.Email = normaliseEmail(in.Email)
	if err := validateEmail(in.Email); err != "" {
		fe.Add("email", strings.Replace(err, "your", "their", 1))
	}
	if !in.Role.Valid() {
		fe.Add("role", "Choose a listed role.")
	}
	return fe.Err()
}

// InvitationPath is where an invitation's link points, followed by its token. The token is in
// the query, which the request log leaves out, rather than in the path, which it records.
const InvitationPath = "/invitations?token="

// Invite records an invitation to the account in use of by's session and, in the same
// transaction, queues its e-mail (key "invite:<id>"), whose link holds a token stored only as its
// hash. Only owners and admins invite, and only an owner invites an owner.
func (s *Service) Invite(ctx context.Context, by Session, in InviteInput) (_ Invitation, err error) {
	defer services.Wrap(&err, "accounts.Invite")
	if err := in.Validate(); err != nil {
		return Invitation{}, err
	}
	if err := mayManage(by, "", in.Role); err != nil {
		return Invitation{}, err
	}
	if s.outbox == nil {
		return Invitation{}, services.Errorf(services.CodeUnavailable,
			"This platform cannot send e-mail yet, so it cannot send invitations. Try again later.")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Invitation{}, err
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	hash := sha256.Sum256([]byte(token))
	now := s.now().UTC()
	inv := Invitation{AccountID: by.Account.ID, AccountName: by.Account.Name, Email: in.Email, Role: in.Role,
		InvitedBy: by.User.Email, CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var member bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id
			WHERE m.account_id = $1 AND u.email = $2)`, inv.AccountID, inv.Email).Scan(&member); err != nil {
			return err
		}
		if member {
			return &services.Error{Code: services.CodeConflict, Message: "Please correct the highlighted fields.",
				Fields: map[string]string{"email": "They are already a member of this account."}}
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO invitations (account_id, email, role, token_hash, invited_by, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			inv.AccountID, inv.Email, string(inv.Role), hash[:], by.User.ID, now, inv.ExpiresAt).Scan(&inv.ID); err != nil {
			return err
		}
		return s.outbox.Enqueue(ctx, tx, invitationMessage(inv, strings.TrimRight(in.LinkBase, "/")+InvitationPath+token))
	})
	if err != nil {
		return Invitation{}, err
	}
	return inv, nil
}

func invitationMessage(inv Invitation, link string) gpumail.Message {
	text := fmt.Sprintf(`%s invites you to join %s on gpumarket as %s.

Accept the invitation here:

%s

The link works once and until %s. If you did not expect it, ignore this e-mail.
`, inv.InvitedBy, inv.AccountName, inv.Role, link, inv.ExpiresAt.Format("2 January 2006 15:04 MST"))
	return gpumail.Message{Key: "invite:" + inv.ID, To: []string{inv.Email},
		Subject: fmt.Sprintf("Join %s on gpumarket", inv.AccountName), Text: text}
}

const invitationColumns = `i.id, i.account_id, a.name, i.email, i.role, u.email, i.created_at, i.expires_at`

func scanInvitation(r pgx.Row, inv *Invitation, more ...any) error {
	return r.Scan(append([]any{&inv.ID, &inv.AccountID, &inv.AccountName, &inv.Email, &inv.Role, &inv.InvitedBy,
		&inv.CreatedAt, &inv.ExpiresAt}, more...)...)
}

// Invitations lists the account's invitations not yet accepted, revoked or expired, newest first.
func (s *Service) Invitations(ctx context.Context, accountID string) (_ []Invitation, err error) {
	defer services.Wrap(&err, "accounts.Invitations")
	rows, err := s.pool.Query(ctx, `SELECT `+invitationColumns+`
		FROM invitations i JOIN accounts a ON a.id = i.account_id JOIN users u ON u.id = i.invited_by
		WHERE i.account_id = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > $2
		ORDER BY i.created_at DESC`, accountID, s.now())
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Invitation, error) {
		var inv Invitation
		err := scanInvitation(r, &inv)
		return inv, err
	})
}

// RevokeInvitation revokes one of the pending invitations of the account in use: its link is
// refused from then on.
func (s *Service) RevokeInvitation(ctx context.Context, by Session, id string) (err error) {
	defer services.Wrap(&err, "accounts.RevokeInvitation(%s)", id)
	if !by.Member.Manages() {
		return services.Errorf(services.CodeForbidden, "Only the account's owners and admins manage its members.")
	}
	tag, err := s.pool.Exec(ctx, `UPDATE invitations SET revoked_at = $3
		WHERE id = $1 AND account_id = $2 AND accepted_at IS NULL AND revoked_at IS NULL`, id, by.Account.ID, s.now().UTC())
	if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
		return services.Errorf(services.CodeNotFound, "No such pending invitation.")
	}
	return err
}

var (
	errInvitationUnknown = services.Errorf(services.CodeNotFound,
		"This invitation link is not valid. Check you copied all of it, or ask for a new invitation.")
	errInvitationUsed = services.Errorf(services.CodeConflict,
		"This invitation has already been used. Log in, or ask the account's owner for a new invitation.")
	errInvitationRevoked = services.Errorf(services.CodeConflict,
		"This invitation was withdrawn. Ask the account's owner for a new invitation.")
	errInvitationExpired = services.Errorf(services.CodeConflict,
		"This invitation has expired. Ask the account's owner for a new invitation.")
)

// InvitationByToken is the invitation a link's token names, refused when it was used, revoked
// or has expired.
func (s *Service) InvitationByToken(ctx context.Context, token string) (_ Invitation, err error) {
	defer services.Wrap(&err, "accounts.InvitationByToken")
	return s.pendingInvitation(ctx, s.pool, token, "")
}

// pendingInvitation reads the invitation of the token through q, with lock appended to the query.
func (s *Service) pendingInvitation(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, token, lock string) (Invitation, error) {
	hash := sha256.Sum256([]byte(token))
	var inv Invitation
	var accepted, revoked *time.Time
	err := scanInvitation(q.QueryRow(ctx, `SELECT `+invitationColumns+`, i.accepted_at, i.revoked_at,
			EXISTS (SELECT 1 FROM users x WHERE x.email = i.email)
		FROM invitations i JOIN accounts a ON a.id = i.account_id JOIN users u ON u.id = i.invited_by
		WHERE i.token_hash = $1`+lock, hash[:]), &inv, &accepted, &revoked, &inv.HasLogin)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Invitation{}, errInvitationUnknown
	case err != nil:
		return Invitation{}, err
	case accepted != nil:
		return Invitation{}, errInvitationUsed
	case revoked != nil:
		return Invitation{}, errInvitationRevoked
	case !s.now().Before(inv.ExpiresAt):
		return Invitation{}, errInvitationExpired
	}
	return inv, nil
}

// AcceptInput accepts an invitation. The invited email's login proves itself with its password,
// or by being the login of the session that accepts (SignedIn); an email without a login makes
// one with Password.
type AcceptInput struct {
	Token    string
	Password string
	SignedIn *User
	ClientIP string
}

// AcceptInvitation makes the invited email's login a member of the account with the invitation's
// role, making the login when there is none, uses the invitation up, and opens a session working
// in the account.
func (s *Service) AcceptInvitation(ctx context.Context, in AcceptInput) (_ Session, err error) {
	defer services.Wrap(&err, "accounts.AcceptInvitation")
	inv, err := s.InvitationByToken(ctx, in.Token)
	if err != nil {
		return Session{}, err
	}
	var u User
	var hash string
	switch {
	case in.SignedIn != nil && in.SignedIn.Email == inv.Email:
		u = *in.SignedIn
	case inv.HasLogin:
		charges := loginCharges(inv.Email, in.ClientIP)
		if !s.limiter.take(charges...) {
			return Session{}, services.Errorf(services.CodeRateLimited, "Too many failed logins. Wait a minute and try again.")
		}
		u, err = s.checkPassword(ctx, inv.Email, in.Password)
		if err != errBadLogin {
			s.limiter.give(charges...)
		}
		if err != nil {
			return Session{}, err
		}
	default:
		if n := len(in.Password); n < 10 || n > 200 {
			return Session{}, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
				Fields: map[string]string{"password": "Use between 10 and 200 characters."}}
		}
		if gateErr := s.hashes.run(ctx, func() { hash, err = s.hasher.Hash(in.Password) }); gateErr != nil {
			return Session{}, gateErr
		}
		if err != nil {
			return Session{}, err
		}
	}
	now := s.now().UTC()
	var m Membership
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Locked and read again: of two acceptances at once, the second finds it used.
		if inv, err = s.pendingInvitation(ctx, tx, in.Token, " FOR UPDATE OF i"); err != nil {
			return err
		}
		if u.ID == "" {
			var kind Kind
			if err := tx.QueryRow(ctx, `SELECT kind FROM accounts WHERE id = $1`, inv.AccountID).Scan(&kind); err != nil {
				return err
			}
			if u, err = insertUser(ctx, tx, inv.AccountID, inv.Email, hash, roleIn("", kind), now, &now); isUniqueViolation(err) {
				return services.Errorf(services.CodeConflict, "A login for this email was made meanwhile. Reload the page to sign in.")
			} else if err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO memberships (account_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (account_id, user_id) DO NOTHING`, inv.AccountID, u.ID, string(inv.Role), now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE invitations SET accepted_at = $2, accepted_by = $3 WHERE id = $1`,
			inv.ID, now, u.ID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT a.id, a.name, a.kind, m.role FROM memberships m JOIN accounts a ON a.id = m.account_id
			WHERE m.account_id = $1 AND m.user_id = $2`, inv.AccountID, u.ID).
			Scan(&m.Account.ID, &m.Account.Name, &m.Account.Kind, &m.Role)
	})
	if err != nil {
		return Session{}, err
	}
	return s.open(ctx, u, m)
}
