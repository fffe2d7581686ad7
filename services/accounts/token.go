package accounts

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenSigner signs and parses session tokens: HS256 JWTs whose subject is the user and whose
// id (jti) names the session row that logout revokes.
type TokenSigner struct {
	key []byte
}

type sessionClaims struct {
	jwt.RegisteredClaims
}

const tokenIssuer = "gpumarket"

func (t *TokenSigner) sign(userID, sessionID string, issued, expires time.Time) (string, error) {
	claims := sessionClaims{jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		Subject:   userID,
		ID:        sessionID,
		IssuedAt:  jwt.NewNumericDate(issued),
		ExpiresAt: jwt.NewNumericDate(expires),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.key)
}

var errBadToken = errors.New("accounts: invalid session token")

// parse checks the signature, algorithm, issuer and expiry, and returns user and session ids.
func (t *TokenSigner) parse(token string, now time.Time) (userID, sessionID string, err error) {
	var claims sessionClaims
	_, err = jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return t.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(tokenIssuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil || claims.Subject == "" || claims.ID == "" {
		return "", "", errBadToken
	}
	return claims.Subject, claims.ID, nil
}
