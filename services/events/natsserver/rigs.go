package natsserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"
)

// RigUser is the embedded server's user for the rig serving an offering (events.RigUsername), allowed only what
// package events lists for rig credentials (its rigs.go). Pass it in EmbeddedOptions.Users.
func RigUser(providerID, offeringID, password string) *server.User {
	return &server.User{
		Username: events.RigUsername(offeringID),
		Password: password,
		Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{
				usage.Subject(providerID, offeringID),
				events.HeartbeatSubject(providerID, offeringID),
			}},
			Subscribe: &server.SubjectPermission{Allow: []string{
				events.RigInboxPrefix(providerID, offeringID) + ".>",
				events.HeartbeatRequestSubject,
			}},
		},
	}
}

// PlatformUser is a user with every permission, for the platform's own roles (web, gateway, meter) on a server
// that also lets rigs in: once a server has users, a client without credentials is refused.
func PlatformUser(name, password string) *server.User {
	return &server.User{Username: name, Password: password}
}

// RigAuthenticator lets in the platform's own user and every listed offering's rig, with the permissions
// PlatformUser and RigUser give, deciding at connect time: a rig listed after the server started needs no reload.
// It stores no rig password: it recomputes the one a rig presents from the platform's key.
type RigAuthenticator struct {
	PlatformName, PlatformPassword string
	RigKey                         []byte
	// ProviderOf returns the provider of a listed (not delisted) offering.
	ProviderOf func(ctx context.Context, offeringID string) (providerID string, ok bool)
	// Refused, when set, says whether an offering's rig is shut out for now (riglimits.Watcher.Refused: it
	// published usage events faster than its limit); its right credential is then refused.
	Refused func(offeringID string) bool
}

var _ server.Authentication = (*RigAuthenticator)(nil)

// Check implements server.Authentication.
func (a *RigAuthenticator) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil {
		return false
	}
	if o.Username == a.PlatformName {
		if subtle.ConstantTimeCompare([]byte(o.Password), []byte(a.PlatformPassword)) != 1 {
			return false
		}
		c.RegisterUser(PlatformUser(a.PlatformName, a.PlatformPassword))
		return true
	}
	offeringID, ok := strings.CutPrefix(o.Username, "rig-")
	if !ok || offeringID == "" || len(offeringID) > 128 {
		return false
	}
	want := events.RigPassword(a.RigKey, offeringID)
	if subtle.ConstantTimeCompare([]byte(o.Password), []byte(want)) != 1 {
		return false
	}
	if a.Refused != nil && a.Refused(offeringID) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	providerID, ok := a.ProviderOf(ctx, offeringID)
	if !ok {
		return false
	}
	c.RegisterUser(RigUser(providerID, offeringID, want))
	return true
}

// DisconnectUser closes every connection of a user on the server, as a rig shut out for a cooldown is
// (riglimits.Config.Disconnect), and returns how many it closed.
func DisconnectUser(s *server.Server, username string) (int, error) {
	closed := 0
	for {
		conns, err := s.Connz(&server.ConnzOptions{User: username, Limit: 4096})
		if err != nil {
			return closed, fmt.Errorf("natsserver: connections of %s: %w", username, err)
		}
		before := closed
		for _, c := range conns.Conns {
			if s.DisconnectClientByID(c.Cid) == nil {
				closed++
			}
		}
		if closed == before || len(conns.Conns) == conns.Total {
			return closed, nil
		}
	}
}
