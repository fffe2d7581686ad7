package account

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The signed-in user's own settings (/settings/profile): the time zone every page writes their
// moments in (docs/page-text.md, "Moments"). Every login has one, whatever its role.

// commonZones are offered as suggestions beside the field; any zone the database knows is taken.
var commonZones = []string{"UTC", "Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Oslo", "Europe/Berlin",
	"Europe/Helsinki", "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
	"America/Sao_Paulo", "Asia/Kolkata", "Asia/Singapore", "Asia/Tokyo", "Australia/Sydney"}

func (s *Server) profilePage(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	return s.renderProfile(c, http.StatusOK, templates.Form{Values: map[string]string{"time_zone": sess.User.TimeZone}})
}

func (s *Server) renderProfile(c echo.Context, status int, form templates.Form) error {
	sess, _ := core.CurrentSession(c)
	p := templates.ProfilePage{Page: s.Page(c, "Your settings"), Form: form, Zones: commonZones,
		Email: sess.User.Email, Now: core.Moment(c, s.Now())}
	return s.Render(c, status, templates.Profile(p))
}

// profileSubmit saves the time zone; a name the zone database does not know is shown again with
// what is wrong, and nothing is saved.
func (s *Server) profileSubmit(c echo.Context) error {
	sess, _ := core.CurrentSession(c)
	err := s.Accounts.SetTimeZone(c.Request().Context(), sess.User.ID, c.FormValue("time_zone"))
	if services.ErrorCode(err) == services.CodeInvalid {
		_, body := s.Describe(err)
		return s.renderProfile(c, http.StatusUnprocessableEntity,
			templates.Form{Values: core.Submitted(c, "time_zone"), Errors: body.Fields, Error: body.Message})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/profile?flash=saved")
}
