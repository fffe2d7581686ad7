package account

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// KeyChanges carries word of a revoked API key to every gateway process (the KeyChanges of
// web/developer/keys, which cmd/gpumarket implements on NATS): removing a member revokes their keys.
type KeyChanges interface {
	KeyChanged(ctx context.Context, keyID string) error
}

// keyChangeTimeout bounds how long telling the gateways may hold up the answer.
const keyChangeTimeout = 2 * time.Second

func (s *Server) membersPage(c echo.Context) error {
	return s.renderMembers(c, http.StatusOK, templates.Form{Values: map[string]string{"role": string(accounts.MemberDeveloper)}}, "")
}

func (s *Server) renderMembers(c echo.Context, status int, form templates.Form, sent string) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	members, err := s.Accounts.Members(ctx, sess.Account.ID)
	if err != nil {
		return err
	}
	p := templates.MembersPage{Page: s.Page(c, "Members"), AccountName: sess.Account.Name, AccountKind: string(sess.Account.Kind),
		Manages: sess.Member.Manages(), Owner: sess.Member == accounts.MemberOwner, Form: form, Sent: sent}
	for _, r := range accounts.MemberRoles {
		if r != accounts.MemberOwner || p.Owner {
			p.Roles = append(p.Roles, templates.Option{Value: string(r), Label: string(r)})
		}
	}
	for _, m := range members {
		p.Members = append(p.Members, templates.MemberRow{UserID: m.UserID, Email: m.Email, Role: string(m.Role),
			Since: m.Since.UTC().Format("2 Jan 2006"), You: m.UserID == sess.User.ID,
			Changeable: p.Manages && (p.Owner || m.Role != accounts.MemberOwner)})
	}
	if p.Manages {
		invs, err := s.Accounts.Invitations(ctx, sess.Account.ID)
		if err != nil {
			return err
		}
		for _, i := range invs {
			p.Invitations = append(p.Invitations, templates.InvitationRow{ID: i.ID, Email: i.Email, Role: string(i.Role),
				InvitedBy: i.InvitedBy, Expires: core.Moment(c, i.ExpiresAt)})
		}
	}
	return s.Render(c, status, templates.Members(p))
}

func (s *Server) inviteSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	in := accounts.InviteInput{Email: c.FormValue("email"), Role: accounts.MemberRole(c.FormValue("role")), LinkBase: s.BaseURL(c)}
	inv, err := s.Accounts.Invite(c.Request().Context(), sess, in)
	if err != nil {
		values := map[string]string{"email": in.Email, "role": string(in.Role)}
		if services.ErrorCode(err) == services.CodeUnavailable {
			_, body := s.Describe(err)
			return s.renderMembers(c, http.StatusServiceUnavailable, templates.Form{Values: values, Error: body.Message}, "")
		}
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = values
			return s.renderMembers(c, core.StatusFor(err), f, "")
		})
	}
	return s.renderMembers(c, http.StatusOK, templates.Form{Values: map[string]string{"role": string(accounts.MemberDeveloper)}}, inv.Email)
}

func (s *Server) revokeInvitationSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.RevokeInvitation(c.Request().Context(), sess, c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/account/members?flash=invitation-revoked")
}

func (s *Server) memberRoleSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.SetMemberRole(c.Request().Context(), sess, c.Param("id"), accounts.MemberRole(c.FormValue("role"))); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/account/members?flash=member-role-set")
}

// removeMemberPage asks, for a member who created API keys here, whether to revoke them or pass
// them to another member.
func (s *Server) removeMemberPage(c echo.Context) error {
	return s.renderRemoveMember(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderRemoveMember(c echo.Context, status int, form templates.Form) error {
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	members, err := s.Accounts.Members(ctx, sess.Account.ID)
	if err != nil {
		return err
	}
	p := templates.RemoveMemberPage{Page: s.Page(c, "Remove a member"), Form: form,
		Others:  []templates.Option{{Value: "", Label: "Revoke them"}},
		Confirm: core.ConfirmFields(c, removeMemberBinds(c.Param("id")))}
	found := false
	for _, m := range members {
		if m.UserID == c.Param("id") {
			p.Member, found = templates.MemberRow{UserID: m.UserID, Email: m.Email, Role: string(m.Role)}, true
			continue
		}
		p.Others = append(p.Others, templates.Option{Value: m.UserID, Label: "Pass them to " + m.Email})
	}
	if !found {
		return services.Errorf(services.CodeNotFound, "No such member of this account.")
	}
	live, err := s.Accounts.LiveKeysCreatedBy(ctx, sess.Account.ID, p.Member.UserID)
	if err != nil {
		return err
	}
	p.LiveKeys, p.LiveKeysText = live, money.Counted(int64(live), "live API key", "live API keys")
	return s.Render(c, status, templates.RemoveMember(p))
}

// removeMemberBinds is what the removal page's confirmation binds: the action and the member.
func removeMemberBinds(userID string) []string { return []string{"remove member", userID} }

// removeMemberSubmit removes the member once confirmed on the removal page, which is itself
// the confirmation (it asks what becomes of their keys); any other POST shows that page and
// removes no one.
func (s *Server) removeMemberSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	in := accounts.RemoveMemberInput{UserID: c.Param("id"), KeysTransfer: c.FormValue("keys_transfer")}
	if !core.Confirmed(c, core.Confirmation{Binds: removeMemberBinds(in.UserID)}) {
		return s.renderRemoveMember(c, http.StatusOK, templates.Form{Values: map[string]string{"keys_transfer": in.KeysTransfer}})
	}
	revoked, err := s.Accounts.RemoveMember(c.Request().Context(), sess, in)
	if err != nil {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = map[string]string{"keys_transfer": in.KeysTransfer}
			return s.renderRemoveMember(c, core.StatusFor(err), f)
		})
	}
	s.keysRevoked(c.Request().Context(), revoked)
	if in.UserID == sess.User.ID {
		// Who removed themselves has no session here any more.
		s.ClearSessionCookie(c)
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	flash := "member-removed"
	if in.KeysTransfer != "" {
		flash = "member-keys-moved"
	}
	return c.Redirect(http.StatusSeeOther, "/account/members?flash="+flash)
}

// keysRevoked tells every gateway of each revoked key. The revocation is stored by then; a
// gateway that is not told rereads the key within its cache's lifetime.
func (s *Server) keysRevoked(ctx context.Context, ids []string) {
	if s.keyChanges == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyChangeTimeout)
	defer cancel()
	for _, id := range ids {
		if err := s.keyChanges.KeyChanged(ctx, id); err != nil {
			s.Log.Error("telling the gateways that a removed member's API key is revoked failed: they reread it when their cache expires",
				"key", id, "err", err)
		}
	}
}

// switchSubmit makes another of the login's accounts the one its session works in, and goes to
// that account's home.
func (s *Server) switchSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if _, err := s.Accounts.SwitchAccount(c.Request().Context(), sess, c.FormValue("account_id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, core.HomePath+"?flash=switched")
}

func (s *Server) apiSwitch(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	var in struct {
		AccountID string `json:"account_id"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	now, err := s.Accounts.SwitchAccount(c.Request().Context(), sess, in.AccountID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"user": now.User, "account": now.Account, "member_role": now.Member})
}

// Invitations: the link from the e-mail, open to anyone who holds it.

func (s *Server) invitationPage(c echo.Context) error {
	return s.renderInvitation(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderInvitation(c echo.Context, status int, form templates.Form) error {
	token := c.FormValue("token")
	p := templates.InvitationPage{Page: s.Page(c, "Invitation"), Token: token, Form: form}
	inv, err := s.Accounts.InvitationByToken(c.Request().Context(), token)
	if code := services.ErrorCode(err); code == services.CodeNotFound || code == services.CodeConflict {
		st, body := s.Describe(err)
		p.Refused = body.Message
		return s.Render(c, st, templates.Invitation(p))
	} else if err != nil {
		return err
	}
	sess, signedIn := core.CurrentSession(c)
	p.AccountName, p.Email, p.Role, p.InvitedBy, p.HasLogin = inv.AccountName, inv.Email, string(inv.Role), inv.InvitedBy, inv.HasLogin
	p.SignedInAs = signedIn && sess.User.Email == inv.Email
	return s.Render(c, status, templates.Invitation(p))
}

func (s *Server) invitationSubmit(c echo.Context) error {
	in := accounts.AcceptInput{Token: c.FormValue("token"), Password: c.FormValue("password"), ClientIP: c.RealIP()}
	if sess, ok := core.CurrentSession(c); ok {
		in.SignedIn = &sess.User
	}
	sess, err := s.Accounts.AcceptInvitation(c.Request().Context(), in)
	if err != nil {
		switch services.ErrorCode(err) {
		case services.CodeInvalid, services.CodeUnauthorized, services.CodeRateLimited, services.CodeUnavailable:
			st, body := s.Describe(err)
			return s.renderInvitation(c, st, templates.Form{Errors: body.Fields, Error: body.Message})
		case services.CodeNotFound, services.CodeConflict:
			return s.renderInvitation(c, core.StatusFor(err), templates.Form{})
		}
		return err
	}
	if old, ok := core.CurrentSession(c); ok && old.User.ID != sess.User.ID {
		// Another login was signed in here: it is signed out, as logging in would.
		if err := s.Accounts.Logout(c.Request().Context(), old.ID); err != nil {
			return err
		}
	}
	s.SetSessionCookie(c, sess)
	return c.Redirect(http.StatusSeeOther, core.HomePath+"?flash=joined")
}
