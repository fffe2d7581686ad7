// Package core is what every audience's pages and API share: the session on the request, the
// role rules (one table of route prefixes and roles, access.go, which Mux puts in front of
// every route an audience registers), CSRF, decoding a JSON body and reading a form, rendering
// a page into a buffer, the one table that maps application errors to HTTP statuses, request
// ids, the client's address, the confirmation of actions that move money, and the view
// helpers more than one audience writes its figures with (offering rows, amounts, document
// addresses, the reliability record).
//
// The audience packages (web/public, web/account, web/developer, web/developer/keys,
// web/provider, web/finance, web/ledger, web/admin, and web/home, every signed-in role's first
// page) import core and never each other; core imports none of them, and nothing of web but
// web/internal/httpx.
package core

import (
	"log/slog"
	"time"

	"github.com/gpumarket/gpumarket/services/accounts"
)

// Core holds what the shared handlers' helpers need: the accounts that sessions are read
// from, the payments' settings every page shows (test mode, the public address), the
// reliability board, the log that errors go to, and the clock.
type Core struct {
	Accounts *accounts.Service
	Payments Payments
	// Reliability is each offering's reliability record; nil shows every offering without
	// enough traffic yet.
	Reliability Records
	Log         *slog.Logger
	// Now is the clock every page reads the time from.
	Now func() time.Time
}

// HomePath is the home after logging in (web/home): where logging in, signing up, switching
// accounts and accepting an invitation land, and where the header's brand leads a signed-in user.
const HomePath = "/home"
