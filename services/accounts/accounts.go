// Package accounts owns users, the organisations (accounts) they belong to, their roles and
// their sessions.
//
// Invariants: every user belongs to one or more accounts, with a role in each (memberships), and
// every account keeps an owner; a session works in one account its user belongs to; passwords are stored only as
// argon2id hashes; a session token is a signed JWT whose id names a row in sessions, so that
// logging out revokes it server-side; only an admin grants the finance or admin role.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services"
)

// Role is what a user may do on the platform.
type Role string

const (
	RoleDeveloper Role = "developer" // buys credits and calls the API
	RoleProvider  Role = "provider"  // lists rigs
	RoleFinance   Role = "finance"   // reviews invoices, statements and payouts
	RoleAdmin     Role = "admin"     // runs the platform, grants finance and admin
)

// Roles lists every role in the order pages show them.
var Roles = []Role{RoleDeveloper, RoleProvider, RoleFinance, RoleAdmin}

// Valid reports whether r is a known role.
func (r Role) Valid() bool {
	for _, x := range Roles {
		if r == x {
			return true
		}
	}
	return false
}

// User is a person who signs in. In a session, AccountID is the account in use and Role the
// login's role there (Session); read from the users table, AccountID is the account the login
// was made for and Role the one stored (finance and admin are the platform's; developer and
// provider only say what the login signed up as).
type User struct {
	ID        string    `json:"id"`
	AccountID string    `json:"account_id"`
	Email     string    `json:"email"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// EmailVerifiedAt is when the user proved Email by following the link e-mailed to it; nil
	// until then (docs/email.md).
	EmailVerifiedAt *time.Time `json:"email_verified_at"`
	// TimeZone is the IANA zone the pages write the user's moments in: "UTC" until the user
	// chooses another (docs/page-text.md).
	TimeZone string `json:"time_zone"`
}

// Service is the accounts domain on PostgreSQL.
type Service struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	tokens *TokenSigner
	hasher PasswordHasher
	hashes *hashGate
	// dummyHash is checked against when a login's email is unknown, so that both paths cost
	// one hash with the same parameters.
	dummyHash  string
	limiter    *limiter // failed logins and sign-ups, by account and client address
	sessionTTL time.Duration
	outbox     Outbox        // queues invitations, sign-ups' links and password resets; nil: no e-mail
	site       func() string // the site's address for links in e-mail
}

// Config holds what the service needs besides its pool.
type Config struct {
	SessionKey []byte           // HMAC key for session tokens, from the environment
	SessionTTL time.Duration    // how long a session lasts; 0 means 7 days
	Now        func() time.Time // the clock; nil means time.Now
	Hasher     PasswordHasher   // zero value means DefaultHasher
	// HashSlots is how many password hashes may run at once (0: DefaultHashSlots()), and
	// HashWait how long a login or sign-up waits for a slot before it is told to retry (0:
	// DefaultHashWait).
	HashSlots int
	HashWait  time.Duration
	// TrackedKeys caps the login and sign-up buckets kept in memory (0: DefaultTrackedKeys).
	TrackedKeys int
	// Outbox queues the e-mail of invitations (invitations.go), of sign-ups (the link proving the
	// address) and of password resets; nil sends none: inviting and password resets are then
	// unavailable.
	Outbox Outbox
	// SiteURL is the site's address the e-mailed links start with ("https://gpumarket.example"):
	// GPUMARKET_PUBLIC_URL, or where this process listens; never a request's Host header, which
	// whoever asks for a reset writes.
	SiteURL func() string
}

// NewService returns the accounts service.
func NewService(pool *pgxpool.Pool, cfg Config) (*Service, error) {
	if len(cfg.SessionKey) < 32 {
		return nil, errors.New("accounts: the session key must be at least 32 bytes")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 7 * 24 * time.Hour
	}
	if cfg.Hasher == (PasswordHasher{}) {
		cfg.Hasher = DefaultHasher
	}
	dummy, err := cfg.Hasher.Hash("gpumarket-timing-equaliser")
	if err != nil {
		return nil, err
	}
	return &Service{
		dummyHash:  dummy,
		pool:       pool,
		now:        cfg.Now,
		tokens:     &TokenSigner{key: cfg.SessionKey},
		hasher:     cfg.Hasher,
		hashes:     newHashGate(cfg.HashSlots, cfg.HashWait),
		limiter:    newLimiter(cfg.Now, cfg.TrackedKeys),
		sessionTTL: cfg.SessionTTL,
		outbox:     cfg.Outbox,
		site:       cfg.SiteURL,
	}, nil
}

// SignUpInput is what a new user gives.
type SignUpInput struct {
	Email       string `json:"email"`
	Password    string `json:"password"`
	Role        Role   `json:"role"`
	AccountName string `json:"account_name"`
	// ClientIP is the address the sign-up came from, for its rate limit; empty sets none.
	ClientIP string `json:"-"`
}

// Validate checks the input and normalises the email.
func (in *SignUpInput) Validate() error {
	fe := services.FieldErrors{}
	in.Email = normaliseEmail(in.Email)
	if err := validateEmail(in.Email); err != "" {
		fe.Add("email", err)
	}
	if msg := passwordProblem(in.Password); msg != "" {
		fe.Add("password", msg)
	}
	switch in.Role {
	case RoleDeveloper, RoleProvider:
	case RoleFinance, RoleAdmin:
		fe.Add("role", "Finance and admin roles are granted by an admin.")
	default:
		fe.Add("role", "Choose developer or provider.")
	}
	in.AccountName = strings.TrimSpace(in.AccountName)
	if len(in.AccountName) > 200 {
		fe.Add("account_name", "Use at most 200 characters.")
	}
	return fe.Err()
}

// SignUp creates an account (organisation) and its first user. Each client address may sign
// up a few accounts at once and then one every few minutes (see limiter.go); a valid sign-up
// counts, whether or not its email was free.
func (s *Service) SignUp(ctx context.Context, in SignUpInput) (u User, err error) {
	defer services.Wrap(&err, "accounts.SignUp")
	if err := in.Validate(); err != nil {
		return User{}, err
	}
	charges := signupCharges(in.ClientIP)
	if !s.limiter.take(charges...) {
		return User{}, services.Errorf(services.CodeRateLimited,
			"Too many sign-ups from your network. Wait a few minutes and try again.")
	}
	u, err = s.create(ctx, in.Email, in.Password, in.Role, in.AccountName, false)
	if errors.Is(err, errBusy) || ctx.Err() != nil {
		s.limiter.give(charges...) // nothing was tried
	}
	return u, err
}

// create makes the account and its user. A user not known to be verified is sent the link that
// proves their address, in the same transaction.
func (s *Service) create(ctx context.Context, email, password string, role Role, accountName string, verified bool) (User, error) {
	var hash string
	var err error
	if gateErr := s.hashes.run(ctx, func() { hash, err = s.hasher.Hash(password) }); gateErr != nil {
		return User{}, gateErr
	}
	if err != nil {
		return User{}, err
	}
	if accountName == "" {
		accountName = email
	}
	now := s.now().UTC()
	var verifiedAt *time.Time
	if verified {
		verifiedAt = &now
	}
	var u User
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var accountID string
		if err := tx.QueryRow(ctx,
			`INSERT INTO accounts (name, kind, created_at) VALUES ($1, $2, $3) RETURNING id`,
			accountName, string(kindOf(role)), now).Scan(&accountID); err != nil {
			return err
		}
		var err error
		if u, err = insertUser(ctx, tx, accountID, email, hash, role, now, verifiedAt); err != nil {
			return err
		}
		if err := addMember(ctx, tx, accountID, u.ID, MemberOwner, now); err != nil {
			return err
		}
		if verified || s.outbox == nil {
			return nil
		}
		return s.sendVerification(ctx, tx, u)
	})
	if isUniqueViolation(err) {
		return User{}, &services.Error{Code: services.CodeConflict, Message: "That email is already registered. Log in instead.",
			Fields: map[string]string{"email": "This email is already registered."}}
	}
	return u, err
}

// insertUser inserts a login made for the account.
// verifiedAt is when its address was proven, nil when not yet.
func insertUser(ctx context.Context, tx pgx.Tx, accountID, email, hash string, role Role, now time.Time, verifiedAt *time.Time) (User, error) {
	var u User
	err := tx.QueryRow(ctx, `
		INSERT INTO users (account_id, email, password_hash, role, created_at, email_verified_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		RETURNING `+userColumns,
		accountID, email, hash, string(role), now, verifiedAt).Scan(userTargets(&u)...)
	return u, err
}

// addMember makes the login a member of the account.
func addMember(ctx context.Context, tx pgx.Tx, accountID, userID string, role MemberRole, now time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO memberships (account_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)`,
		accountID, userID, string(role), now)
	return err
}

// EnsureUser creates the user with its own account unless the email exists; it is for demo
// seeding, which must change nothing when run twice. Its address counts as verified: the platform
// made it.
func (s *Service) EnsureUser(ctx context.Context, email, password string, role Role, accountName string) (u User, err error) {
	defer services.Wrap(&err, "accounts.EnsureUser(%s)", email)
	u, err = s.UserByEmail(ctx, email)
	if err == nil && u.EmailVerifiedAt == nil {
		err = s.pool.QueryRow(ctx, `UPDATE users SET email_verified_at = $2 WHERE id = $1 RETURNING `+userColumns,
			u.ID, s.now().UTC()).Scan(userTargets(&u)...)
	}
	if err == nil {
		return u, nil
	}
	if services.ErrorCode(err) != services.CodeNotFound {
		return User{}, err
	}
	return s.create(ctx, normaliseEmail(email), password, role, accountName, true)
}

// UserByEmail looks a user up by email.
func (s *Service) UserByEmail(ctx context.Context, email string) (User, error) {
	return s.userWhere(ctx, "email = $1", normaliseEmail(email))
}

// UserByID looks a user up by id.
func (s *Service) UserByID(ctx context.Context, id string) (User, error) {
	return s.userWhere(ctx, "id = $1", id)
}

func (s *Service) userWhere(ctx context.Context, where string, arg any) (User, error) {
	var u User
	err := s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE `+where, arg).Scan(userTargets(&u)...)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return User{}, services.Errorf(services.CodeNotFound, "No such user.")
	}
	return u, err
}

// AccountEmails are the addresses an account's e-mail (its invoices) goes to, read in the caller's
// transaction: its first user's, the one who signed the account up.
func AccountEmails(ctx context.Context, tx pgx.Tx, accountID string) ([]string, error) {
	var email string
	err := tx.QueryRow(ctx, `SELECT email FROM users WHERE account_id = $1 ORDER BY created_at, id LIMIT 1`, accountID).Scan(&email)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("accounts.AccountEmails(%s): %w", accountID, err)
	}
	return []string{email}, nil
}

// ListUsers returns every user, newest first, for the admin page.
func (s *Service) ListUsers(ctx context.Context) (_ []User, err error) {
	defer services.Wrap(&err, "accounts.ListUsers")
	rows, err := s.pool.Query(ctx,
		`SELECT `+userColumns+` FROM users ORDER BY created_at DESC, email LIMIT 500`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) {
		var u User
		err := r.Scan(userTargets(&u)...)
		return u, err
	})
}

// GrantRole changes a user's role. Only an admin may do it; it is recorded with who did it.
func (s *Service) GrantRole(ctx context.Context, by User, userID string, role Role) (err error) {
	defer services.Wrap(&err, "accounts.GrantRole(%s, %s)", userID, role)
	if by.Role != RoleAdmin {
		return services.Errorf(services.CodeForbidden, "Only an admin can change roles.")
	}
	if !role.Valid() {
		return &services.Error{Code: services.CodeInvalid, Message: "Unknown role.", Fields: map[string]string{"role": "Choose a listed role."}}
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET role = $2 WHERE id = $1`, userID, string(role))
		if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
			return services.Errorf(services.CodeNotFound, "No such user.")
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO role_grants (user_id, role, granted_by, created_at) VALUES ($1, $2, $3, $4)`,
			userID, string(role), by.ID, s.now().UTC())
		return err
	})
}

// userColumns are the columns of users a User holds, in userTargets' order.
const userColumns = `id, account_id, email, role, created_at, email_verified_at, time_zone`

func userTargets(u *User) []any {
	return []any{&u.ID, &u.AccountID, &u.Email, &u.Role, &u.CreatedAt, &u.EmailVerifiedAt, &u.TimeZone}
}

// passwordProblem says what is wrong with a new password, or "".
func passwordProblem(p string) string {
	switch n := len(p); {
	case n < 10:
		return "Use at least 10 characters."
	case n > 200:
		return "Use at most 200 characters."
	}
	return ""
}

func normaliseEmail(e string) string { return strings.ToLower(strings.TrimSpace(e)) }

func validateEmail(e string) string {
	if e == "" {
		return "Enter your email address."
	}
	if len(e) > 254 {
		return "That email address is too long."
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || !strings.Contains(e[strings.LastIndex(e, "@")+1:], ".") {
		return "Enter an email address like name@example.com."
	}
	return ""
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isInvalidText is true for a malformed uuid given as an id: to a caller it is simply not found.
func isInvalidText(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02"
}
