package accounts

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Kind is what an account does on the market: a customer's buys inference, a provider's lists
// rigs. A provider who also buys inference holds one of each and switches between them.
type Kind string

const (
	KindCustomer Kind = "customer"
	KindProvider Kind = "provider"
)

// MemberRole is what a login may do in one account it belongs to (docs/members.md). It is apart
// from the platform's own roles: an account's billing member is never the platform's finance.
type MemberRole string

const (
	MemberOwner     MemberRole = "owner"     // everything, including making and removing owners
	MemberAdmin     MemberRole = "admin"     // everything but owners' memberships
	MemberDeveloper MemberRole = "developer" // API keys and usage (a provider's rigs)
	MemberBilling   MemberRole = "billing"   // credits, invoices, billing details
	MemberReadOnly  MemberRole = "read-only" // sees usage, the keys list and invoices; changes nothing
)

// MemberRoles lists every member role in the order pages show them.
var MemberRoles = []MemberRole{MemberOwner, MemberAdmin, MemberDeveloper, MemberBilling, MemberReadOnly}

// Valid reports whether r is a known member role.
func (r MemberRole) Valid() bool {
	for _, x := range MemberRoles {
		if r == x {
			return true
		}
	}
	return false
}

// Manages reports whether the role may invite, change and remove members.
func (r MemberRole) Manages() bool { return r == MemberOwner || r == MemberAdmin }

// Account is an organisation as its members see it.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
}

// Membership is one account a login belongs to and its role there.
type Membership struct {
	Account Account    `json:"account"`
	Role    MemberRole `json:"role"`
}

// Member is one login of an account, as its members page lists it.
type Member struct {
	UserID string     `json:"user_id"`
	Email  string     `json:"email"`
	Role   MemberRole `json:"role"`
	Since  time.Time  `json:"since"`
}

// roleIn is the role a login has on the platform while it works in an account of the kind: the
// platform's own finance and admin keep theirs, anyone else is the account's kind's (developer
// in a customer's account, provider in a provider's), so that the pages of each kind stay with
// the account in use.
func roleIn(stored Role, kind Kind) Role {
	if stored == RoleFinance || stored == RoleAdmin {
		return stored
	}
	if kind == KindProvider {
		return RoleProvider
	}
	return RoleDeveloper
}

// kindOf is the kind of account a sign-up's role makes.
func kindOf(r Role) Kind {
	if r == RoleProvider {
		return KindProvider
	}
	return KindCustomer
}

// Memberships lists the accounts the login belongs to, by name.
func (s *Service) Memberships(ctx context.Context, userID string) (_ []Membership, err error) {
	defer services.Wrap(&err, "accounts.Memberships")
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.name, a.kind, m.role FROM memberships m JOIN accounts a ON a.id = m.account_id
		WHERE m.user_id = $1 ORDER BY a.name, a.id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Membership, error) {
		var m Membership
		err := r.Scan(&m.Account.ID, &m.Account.Name, &m.Account.Kind, &m.Role)
		return m, err
	})
}

// membershipIn is the login's membership of the account; without accountID, of the account the
// login was made for while it still belongs there, else of the first it joined.
func (s *Service) membershipIn(ctx context.Context, userID, accountID string) (Membership, error) {
	var m Membership
	err := s.pool.QueryRow(ctx, `
		SELECT a.id, a.name, a.kind, m.role
		FROM memberships m JOIN accounts a ON a.id = m.account_id JOIN users u ON u.id = m.user_id
		WHERE m.user_id = $1 AND ($2 = '' OR m.account_id = nullif($2, '')::uuid)
		ORDER BY m.account_id = u.account_id DESC, m.created_at, m.account_id LIMIT 1`, userID, accountID).
		Scan(&m.Account.ID, &m.Account.Name, &m.Account.Kind, &m.Role)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		if accountID != "" {
			return Membership{}, &services.Error{Code: services.CodeForbidden, Message: "You are not a member of that account.",
				Fields: map[string]string{"account_id": "Choose one of your accounts."}}
		}
		return Membership{}, services.Errorf(services.CodeForbidden,
			"Your login belongs to no account now. Ask an account's owner to invite you again.")
	}
	return m, err
}

// Members lists the account's members, owners first.
func (s *Service) Members(ctx context.Context, accountID string) (_ []Member, err error) {
	defer services.Wrap(&err, "accounts.Members")
	rows, err := s.pool.Query(ctx, `
		SELECT u.id, u.email, m.role, m.created_at FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.account_id = $1 ORDER BY m.role <> 'owner', u.email`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		err := r.Scan(&m.UserID, &m.Email, &m.Role, &m.Since)
		return m, err
	})
}

var errNoMember = services.Errorf(services.CodeNotFound, "No such member of this account.")

// mayManage refuses a caller who may not change the member: only owners and admins manage, and
// only an owner touches an owner's membership or makes one.
func mayManage(by Session, target, to MemberRole) error {
	if !by.Member.Manages() {
		return services.Errorf(services.CodeForbidden, "Only the account's owners and admins manage its members.")
	}
	if by.Member != MemberOwner && (target == MemberOwner || to == MemberOwner) {
		return services.Errorf(services.CodeForbidden, "Only an owner can make, change or remove an owner.")
	}
	return nil
}

// lockMember locks the account's row, so that two changes at once cannot both take its last
// owner away, and returns the member's role.
func lockMember(ctx context.Context, tx pgx.Tx, accountID, userID string) (MemberRole, error) {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`, accountID); err != nil {
		return "", err
	}
	var role MemberRole
	err := tx.QueryRow(ctx, `SELECT role FROM memberships WHERE account_id = $1 AND user_id = $2`, accountID, userID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return "", errNoMember
	}
	return role, err
}

// keepsAnOwner refuses a change that would leave the account without an owner.
func keepsAnOwner(ctx context.Context, tx pgx.Tx, accountID string) error {
	var owners int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM memberships WHERE account_id = $1 AND role = 'owner'`,
		accountID).Scan(&owners); err != nil {
		return err
	}
	if owners == 0 {
		return services.Errorf(services.CodeConflict, "An account always has an owner. Make another member an owner first.")
	}
	return nil
}

// SetMemberRole changes a member's role in the account in use of by's session.
func (s *Service) SetMemberRole(ctx context.Context, by Session, userID string, role MemberRole) (err error) {
	defer services.Wrap(&err, "accounts.SetMemberRole(%s, %s)", userID, role)
	if !role.Valid() {
		return &services.Error{Code: services.CodeInvalid, Message: "Unknown role.", Fields: map[string]string{"role": "Choose a listed role."}}
	}
	accountID := by.Account.ID
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		was, err := lockMember(ctx, tx, accountID, userID)
		if err != nil {
			return err
		}
		if err := mayManage(by, was, role); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE memberships SET role = $3 WHERE account_id = $1 AND user_id = $2`,
			accountID, userID, string(role)); err != nil {
			return err
		}
		return keepsAnOwner(ctx, tx, accountID)
	})
}

// RemoveMemberInput says whom to remove from the account in use, and to whom their API keys
// pass: "" revokes them.
type RemoveMemberInput struct {
	UserID       string
	KeysTransfer string
}

// RemoveMember takes a member out of the account in use of by's session. In the same
// transaction their sessions in the account are revoked, so their next request is refused, and
// the live API keys they created are revoked, or pass to another member when KeysTransfer names
// one. It returns the revoked keys' ids: the gateways must be told of each (the KeyChanges of
// web/developer/keys).
func (s *Service) RemoveMember(ctx context.Context, by Session, in RemoveMemberInput) (revoked []string, err error) {
	defer services.Wrap(&err, "accounts.RemoveMember(%s)", in.UserID)
	accountID := by.Account.ID
	if in.KeysTransfer == in.UserID && in.KeysTransfer != "" {
		return nil, &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
			Fields: map[string]string{"keys_transfer": "Choose a member who stays, or revoke the keys."}}
	}
	now := s.now().UTC()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		was, err := lockMember(ctx, tx, accountID, in.UserID)
		if err != nil {
			return err
		}
		if err := mayManage(by, was, ""); err != nil {
			return err
		}
		if in.KeysTransfer != "" {
			if _, err := lockMember(ctx, tx, accountID, in.KeysTransfer); err != nil {
				return &services.Error{Code: services.CodeInvalid, Message: "Please correct the highlighted fields.",
					Fields: map[string]string{"keys_transfer": "Choose a member of this account."}}
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM memberships WHERE account_id = $1 AND user_id = $2`, accountID, in.UserID); err != nil {
			return err
		}
		if err := keepsAnOwner(ctx, tx, accountID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET revoked_at = $3
			WHERE account_id = $1 AND user_id = $2 AND revoked_at IS NULL`, accountID, in.UserID, now); err != nil {
			return err
		}
		if in.KeysTransfer != "" {
			_, err := tx.Exec(ctx, `UPDATE api_keys SET created_by = $3
				WHERE account_id = $1 AND created_by = $2 AND revoked_at IS NULL`, accountID, in.UserID, in.KeysTransfer)
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE api_keys SET revoked_at = $3
			WHERE account_id = $1 AND created_by = $2 AND revoked_at IS NULL RETURNING id::text`, accountID, in.UserID, now)
		if err != nil {
			return err
		}
		revoked, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// SwitchAccount makes another of the login's accounts the one its session works in, and returns
// the session as it is now. The token stays the same: it names the session, whose row holds the
// account in use.
func (s *Service) SwitchAccount(ctx context.Context, sess Session, accountID string) (_ Session, err error) {
	defer services.Wrap(&err, "accounts.SwitchAccount")
	if accountID == "" {
		return Session{}, &services.Error{Code: services.CodeInvalid, Message: "Choose one of your accounts.",
			Fields: map[string]string{"account_id": "Choose one of your accounts."}}
	}
	m, err := s.membershipIn(ctx, sess.User.ID, accountID)
	if err != nil {
		return Session{}, err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET account_id = $2 WHERE id = $1 AND revoked_at IS NULL`, sess.ID, m.Account.ID)
	if err != nil {
		return Session{}, err
	}
	if tag.RowsAffected() == 0 {
		return Session{}, errNoSession
	}
	return sess.in(m), nil
}

// LiveKeysCreatedBy counts the account's live API keys the login created: what removing it
// revokes or passes on.
func (s *Service) LiveKeysCreatedBy(ctx context.Context, accountID, userID string) (n int, err error) {
	defer services.Wrap(&err, "accounts.LiveKeysCreatedBy")
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE account_id = $1 AND created_by = $2 AND revoked_at IS NULL`,
		accountID, userID).Scan(&n)
	if isInvalidText(err) {
		return 0, errNoMember
	}
	return n, err
}
