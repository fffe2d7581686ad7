// Package rigauth lets rigs into the platform's NATS, embedded or a cluster, and puts them out again. It owns the
// answer to nats-server's auth callout: a rig presents its user (events.RigUsername) and the password of its
// credential's current issue (events.RigPasswordIssue); the platform's Responder, which reads the listing, answers
// with a user placed in the rigs' account (events.RigsAccount) with exactly events.RigPermissions, signed by an
// account key only the platform holds (Issuer). The server's configuration names only that key's public half, so
// nothing in it can admit a rig. Revoker closes a rig's connections on every node of the cluster through the system
// account, so that a re-issued credential, a delisted offering or a rig shut out is out within a second.
//
// Invariants: the Responder never admits a name that is not rig-<offering id> of a listed offering with the
// password of its current issue, nor a rig shut out (Refused); every admitted rig gets RigPermissions and nothing
// else, in the rigs' account; the platform's own users never reach the Responder (they are the callout's
// auth_users, checked by the server itself). See docs/usage-stream.md, "The rigs' entry point".
package rigauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpumarket/gpumarket/services/events"
)

const (
	// issuerLabel separates the callout's key from anything else the platform derives from the rig key.
	issuerLabel = "gpumarket NATS auth callout issuer v1\x00"
	// rigPasswordLen is the length of every password events.RigPasswordIssue derives.
	rigPasswordLen = 43
	// lookupTimeout bounds the listing's read for one connection; nats-server's own wait is its auth timeout.
	lookupTimeout = 2 * time.Second
)

// Issuer is the account key that signs the responder's answers, derived from the rig key (GPUMARKET_RIG_KEY): the
// platform needs no secret beside the one its rigs' passwords come from, and rotating that key rotates this one
// with every rig's password. Its public key (IssuerPublicKey, `gpumarket nats-issuer`) is the auth callout's
// issuer in the NATS configuration; its seed is never written anywhere.
func Issuer(rigKey []byte) (nkeys.KeyPair, error) {
	m := hmac.New(sha256.New, rigKey)
	m.Write([]byte(issuerLabel))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteAccount, m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("rigauth: derive the callout issuer: %w", err)
	}
	return kp, nil
}

// IssuerPublicKey is the public key of Issuer(rigKey): what the NATS configuration's auth_callout.issuer names.
func IssuerPublicKey(rigKey []byte) (string, error) {
	kp, err := Issuer(rigKey)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}

// Responder answers nats-server's auth callout for rigs.
type Responder struct {
	// Issuer signs the answers (Issuer(RigKey)).
	Issuer nkeys.KeyPair
	// RigKey derives each rig's password (events.RigPasswordIssue).
	RigKey []byte
	// RigOf returns the provider of a listed (not delisted) offering and the issue of its rig's credential: a rig
	// presenting an earlier issue's password is refused.
	RigOf func(ctx context.Context, offeringID string) (providerID string, credentialIssue int, ok bool)
	// Refused, when set, says whether an offering's rig is shut out for now (riglimits.Watcher.Refused); its right
	// credential is then refused.
	Refused func(offeringID string) bool
	// Log receives one line per refusal at debug level and the responder's own failures; nil means slog.Default().
	Log *slog.Logger
}

// Serve answers the callout's requests on nc, a connection of the platform's own user in the callout's account,
// beside any other platform process doing the same (one of them answers each request), until the subscription is
// drained or nc closes.
func (r *Responder) Serve(nc *nats.Conn) (*nats.Subscription, error) {
	sub, err := nc.QueueSubscribe(events.AuthCalloutSubject, events.AuthCalloutQueue, r.answer)
	if err != nil {
		return nil, fmt.Errorf("rigauth: subscribe to the auth callout: %w", err)
	}
	// The subscription is in place on the server before Serve returns: a rig connecting next is answered.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("rigauth: subscribe to the auth callout: %w", err)
	}
	return sub, nil
}

func (r *Responder) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// answer admits or refuses one connection. A refusal is an answer too (with an error, so the server closes the
// connection at once rather than at its auth timeout); every refusal reads the same to the client.
func (r *Responder) answer(m *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		r.log().Warn("an auth callout request could not be read", "err", err)
		return
	}
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	if resp == nil {
		r.log().Warn("an auth callout request names no user key", "server", req.Server.Name)
		return
	}
	resp.Audience = req.Server.ID
	user, why := r.admit(req)
	if why != "" {
		r.log().Debug("rig refused", "user", req.ConnectOptions.Username, "why", why, "host", req.ClientInformation.Host)
		resp.Error = "not authorized"
	} else {
		if resp.Jwt, err = user.Encode(r.Issuer); err != nil {
			r.log().Error("a rig's user could not be signed", "err", err)
			return
		}
	}
	token, err := resp.Encode(r.Issuer)
	if err != nil {
		r.log().Error("an auth callout answer could not be signed", "err", err)
		return
	}
	if err := m.Respond([]byte(token)); err != nil {
		r.log().Warn("an auth callout answer could not be sent", "err", err)
	}
}

// admit returns the user a connection gets, or why it gets none.
func (r *Responder) admit(req *jwt.AuthorizationRequestClaims) (*jwt.UserClaims, string) {
	o := req.ConnectOptions
	offeringID, ok := strings.CutPrefix(o.Username, "rig-")
	if !ok || offeringID == "" || len(offeringID) > 128 {
		return nil, "not a rig's name"
	}
	if len(o.Password) != rigPasswordLen {
		return nil, "not a rig's password"
	}
	// The listing is read before the password is checked, since the password depends on its issue: whoever
	// reaches the entry point with a rig's name and a password of the right length makes one lookup by key.
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	providerID, issue, ok := r.RigOf(ctx, offeringID)
	if !ok {
		return nil, "no listed offering"
	}
	want := events.RigPasswordIssue(r.RigKey, offeringID, issue)
	if subtle.ConstantTimeCompare([]byte(o.Password), []byte(want)) != 1 {
		return nil, "wrong password"
	}
	if r.Refused != nil && r.Refused(offeringID) {
		return nil, "shut out"
	}
	return RigUserClaims(req.UserNkey, providerID, offeringID), ""
}

// RigUserClaims is the user a rig is admitted as: named events.RigUsername (the name the server's connection list
// shows, which Revoker looks for), in events.RigsAccount, allowed events.RigPermissions and nothing else.
func RigUserClaims(userNkey, providerID, offeringID string) *jwt.UserClaims {
	u := jwt.NewUserClaims(userNkey)
	u.Name = events.RigUsername(offeringID)
	u.Audience = events.RigsAccount // in server-configuration mode, the account the user is placed in
	publish, subscribe := events.RigPermissions(providerID, offeringID)
	u.Pub.Allow.Add(publish...)
	u.Sub.Allow.Add(subscribe...)
	return u
}
