package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/templates"
)

// Confirming what moves money or cannot be undone (docs/web-security.md, "Confirming what
// moves money"). Such an action's POST acts only when it carries confirm=yes and a token that
// binds the session, the action and every figure its confirmation page showed. Any other POST
// of it (the document page's button, a form from before this rule, a forged or stale one)
// shows the confirmation page instead and moves nothing; so does its GET. A confirmation
// whose figures have changed since (a draft computed again, a document already approved)
// carries a token that no longer matches, and is shown again with the figures as they are.

// Confirmation is an action's confirmation page, with what its token binds.
type Confirmation struct {
	templates.ConfirmPage
	// Binds are the action and the figures shown, in order: the token is their MAC.
	Binds []string
}

// confirmKey is the key of the session's confirmation tokens: derived from the session's own
// secret token, so a token is good only in the session that was shown the page, on any replica.
func confirmKey(c echo.Context) []byte {
	sess, _ := CurrentSession(c)
	k := sha256.Sum256([]byte("gpumarket Confirmation\x00" + sess.Token))
	return k[:]
}

// confirmToken is the token of the bound values in this session.
func confirmToken(c echo.Context, binds []string) string {
	m := hmac.New(sha256.New, confirmKey(c))
	for _, b := range binds {
		m.Write([]byte(b))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Confirmed reports whether the request confirms exactly what conf shows.
func Confirmed(c echo.Context, conf Confirmation) bool {
	if c.Request().Method != http.MethodPost || c.FormValue("confirm") != "yes" {
		return false
	}
	return hmac.Equal([]byte(c.FormValue("confirm_token")), []byte(confirmToken(c, conf.Binds)))
}

// AskToConfirm shows the confirmation page. A request that confirmed something else (figures
// that have changed since, a document no longer in the state it was) is told so, with 409.
func (s *Core) AskToConfirm(c echo.Context, title string, conf Confirmation) error {
	p := conf.ConfirmPage
	p.Page = s.Page(c, title)
	status := http.StatusOK
	if p.Button == "" && c.Request().Method == http.MethodPost {
		status = http.StatusConflict
	}
	if c.FormValue("confirm") == "yes" {
		status = http.StatusConflict
		p.Stale = "Nothing was done: what you confirmed is no longer what this would do. Check the figures below and confirm again."
	}
	if p.Button != "" {
		p.Token = confirmToken(c, conf.Binds)
	}
	return s.Render(c, status, templates.Confirm(p))
}

// ConfirmFields are the fields of a form that is itself an action's confirmation, because the
// page asks a choice as it confirms (removing a member asks what becomes of their keys):
// confirm=yes and the token that binds the action. Confirmed checks them as it checks the
// confirmation page's.
func ConfirmFields(c echo.Context, binds []string) []templates.HiddenField {
	return []templates.HiddenField{{Name: "confirm", Value: "yes"}, {Name: "confirm_token", Value: confirmToken(c, binds)}}
}

// HiddenFields carries the named fields of the request to the confirmation's form.
func HiddenFields(c echo.Context, names ...string) []templates.HiddenField {
	var out []templates.HiddenField
	for _, n := range names {
		if v := c.FormValue(n); v != "" {
			out = append(out, templates.HiddenField{Name: n, Value: v})
		}
	}
	return out
}

// BindFields is the action and its fields' values, for a token.
func BindFields(action string, fields []templates.HiddenField) []string {
	b := []string{action}
	for _, f := range fields {
		b = append(b, f.Name+"="+strings.TrimSpace(f.Value))
	}
	return b
}
