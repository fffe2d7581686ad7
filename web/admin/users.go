package admin

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

func (s *Server) usersPage(c echo.Context) error {
	users, err := s.Accounts.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(users))
	for _, u := range users {
		ids = append(ids, u.AccountID)
	}
	names, err := s.Accounts.AccountNames(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	rows := make([]templates.UserRow, 0, len(users))
	for _, u := range users {
		rows = append(rows, templates.UserRow{ID: u.ID, Email: u.Email, Role: string(u.Role), AccountID: u.AccountID,
			Account: names[u.AccountID], Created: u.CreatedAt.UTC().Format("2006-01-02")})
	}
	return s.Render(c, http.StatusOK, templates.Users(templates.UsersPage{Page: s.Page(c, "Users"), Users: rows, Roles: roleNames()}))
}

func (s *Server) grantRoleSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.GrantRole(c.Request().Context(), sess.User, c.Param("id"), accounts.Role(c.FormValue("role"))); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users?flash=role-set")
}

func (s *Server) apiUsers(c echo.Context) error {
	users, err := s.Accounts.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"users": users})
}

func (s *Server) apiGrantRole(c echo.Context) error {
	var in struct {
		Role accounts.Role `json:"role"`
	}
	if err := core.DecodeJSON(c, &in); err != nil {
		return err
	}
	sess, _ := core.CurrentSession(c)
	if err := s.Accounts.GrantRole(c.Request().Context(), sess.User, c.Param("id"), in.Role); err != nil {
		return err
	}
	u, err := s.Accounts.UserByID(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

func roleNames() []string {
	out := make([]string, 0, len(accounts.Roles))
	for _, r := range accounts.Roles {
		out = append(out, string(r))
	}
	return out
}
