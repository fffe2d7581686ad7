package core

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/labstack/echo/v4"
)

// maxRequestIDLen is the longest X-Request-ID taken from a client.
const maxRequestIDLen = 64

// RequestID gives every request an id, in the X-Request-ID header of the request (for the
// handlers) and of the response. A client's own id is kept only when it is short and plain
// (at most 64 letters, digits and . _ : -); any other is replaced by a new one, so that what a
// client sends is never echoed or logged whole. See docs/web-security.md ("Request ids").
func RequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !plainRequestID(id) {
			id = RandomHex(16)
		}
		c.Request().Header.Set(echo.HeaderXRequestID, id)
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

// plainRequestID reports whether a client's request id may be kept as it is.
func plainRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// RandomHex is n random bytes in hexadecimal.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
