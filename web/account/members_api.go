package account

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The members and invitations in JSON (docs/api.md): the same service calls and the same role
// rules as the members page, whose guard (web/internal/core/access.go) lets every member read
// the members and only owners and admins change them or see the invitations.

func (s *Server) apiMembers(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	members, err := s.Accounts.Members(c.Request().Context(), sess.Account.ID)
	if err != nil {
		return err
	}
	if members == nil {
		members = []accounts.Member{}
	}
	return c.JSON(http.StatusOK, map[string]any{"members": members, "count": len(members)})
}

// member is one member of the account in use, or not found.
func (s *Server) member(c echo.Context, userID string) (accounts.Member, error) {
	sess, _ := core.CurrentSession(c)
	members, err := s.Accounts.Members(c.Request().Context(), sess.Account.ID)
	if err != nil {
		return accounts.Member{}, err
	}
	for _, m := range members {
		if m.UserID == userID {
			return m, nil
		}
	}
	return accounts.Member{}, services.Errorf(services.CodeNotFound, "No such member of this account.")
}

// apiSetMemberRole changes a member's role: PATCH /api/account/members/{user id} {"role": "billing"}.
func (s *Server) apiSetMemberRole(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	var in struct {
		Role accounts.MemberRole `json:"role"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	if err := s.Accounts.SetMemberRole(c.Request().Context(), sess, c.Param("id"), in.Role); err != nil {
		return err
	}
	m, err := s.member(c, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// apiRemoveMember takes a member out of the account: DELETE /api/account/members/{user id},
// with ?keys_transfer={user id} to pass the live API keys they created to a member who stays
// rather than revoke them. It answers with the ids of the keys it revoked.
func (s *Server) apiRemoveMember(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	in := accounts.RemoveMemberInput{UserID: c.Param("id"), KeysTransfer: c.QueryParam("keys_transfer")}
	revoked, err := s.Accounts.RemoveMember(c.Request().Context(), sess, in)
	if err != nil {
		return err
	}
	s.keysRevoked(c.Request().Context(), revoked)
	if revoked == nil {
		revoked = []string{}
	}
	return c.JSON(http.StatusOK, map[string]any{"removed": in.UserID, "revoked_keys": revoked,
		"keys_transferred_to": in.KeysTransfer})
}

func (s *Server) apiInvitations(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	invs, err := s.Accounts.Invitations(c.Request().Context(), sess.Account.ID)
	if err != nil {
		return err
	}
	if invs == nil {
		invs = []accounts.Invitation{}
	}
	return c.JSON(http.StatusOK, map[string]any{"invitations": invs, "count": len(invs)})
}

// apiInvite invites a person: POST /api/account/invitations {"email": "...", "role": "developer"}.
// The link goes by e-mail only: the answer never holds it.
func (s *Server) apiInvite(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	var body struct {
		Email string              `json:"email"`
		Role  accounts.MemberRole `json:"role"`
	}
	if err := core.DecodeJSON(c, &body); err != nil {
		return err
	}
	inv, err := s.Accounts.Invite(c.Request().Context(), sess,
		accounts.InviteInput{Email: body.Email, Role: body.Role, LinkBase: s.BaseURL(c)})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, inv)
}

func (s *Server) apiRevokeInvitation(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.RevokeInvitation(c.Request().Context(), sess, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
