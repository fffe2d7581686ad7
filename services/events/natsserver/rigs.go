package natsserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"
)

// RigsAccount is the NATS account rigs' users live in on the embedded server, apart from the platform's own
// (the server's global account, where the USAGE stream, the meter, the gateways and every platform process are).
// A rig sees nothing of the platform's account but what the two accounts share, each way
// (docs/usage-stream.md, "The rigs' entry point"):
//   - usage.*.*, a service the platform exports to RIGS: a rig's event, and the stream's acknowledgement back to
//     the rig's own inbox.
//   - heartbeat.*.*, a stream RIGS exports to the platform: the rigs' heartbeats.
//   - heartbeat_request, a stream the platform exports to RIGS: a gateway asking every rig for a heartbeat now.
//   - rigcall.*.*.>, a stream the platform exports to RIGS: a gateway's calls to a rig (events.RigCallSubject).
//   - rigreply.*.*.>, a stream RIGS exports to the platform: the rigs' answers (events.RigReplySubject).
//
// Within RIGS each rig's user may still publish only its own subjects (RigUser), so a rig cannot speak for another,
// and no subject of the platform's account (the JetStream API, the meter's fetches, the gateways' feeds) exists for
// it at all.
const RigsAccount = "RIGS"

// openRigsAccount registers RigsAccount on a started server with what it shares with the platform's account. It
// runs after the server started so that JetStream stays enabled for the global account, as a server with no other
// account enables it: the USAGE stream kept there by earlier versions is the same stream.
func openRigsAccount(s *server.Server) (*server.Account, error) {
	rigs, err := s.RegisterAccount(RigsAccount)
	if err != nil {
		return nil, fmt.Errorf("natsserver: register the %s account: %w", RigsAccount, err)
	}
	platform := s.GlobalAccount()
	usageSubjects := usage.Subject("*", "*")
	heartbeats := events.HeartbeatSubject("*", "*")
	rigCalls := events.RigCallSubject("*", "*") + ".>"
	rigReplies := events.RigReplySubject("*", "*") + ".>"
	for _, step := range []struct {
		what string
		do   func() error
	}{
		{"export usage", func() error { return platform.AddServiceExport(usageSubjects, []*server.Account{rigs}) }},
		{"import usage", func() error { return rigs.AddServiceImport(platform, usageSubjects, "") }},
		{"export heartbeats", func() error { return rigs.AddStreamExport(heartbeats, []*server.Account{platform}) }},
		{"import heartbeats", func() error { return platform.AddStreamImport(rigs, heartbeats, "") }},
		{"export heartbeat requests", func() error {
			return platform.AddStreamExport(events.HeartbeatRequestSubject, []*server.Account{rigs})
		}},
		{"import heartbeat requests", func() error {
			return rigs.AddStreamImport(platform, events.HeartbeatRequestSubject, "")
		}},
		{"export calls", func() error { return platform.AddStreamExport(rigCalls, []*server.Account{rigs}) }},
		{"import calls", func() error { return rigs.AddStreamImport(platform, rigCalls, "") }},
		{"export replies", func() error { return rigs.AddStreamExport(rigReplies, []*server.Account{platform}) }},
		{"import replies", func() error { return platform.AddStreamImport(rigs, rigReplies, "") }},
	} {
		if err := step.do(); err != nil {
			return nil, fmt.Errorf("natsserver: %s account: %s: %w", RigsAccount, step.what, err)
		}
	}
	return rigs, nil
}

// RigUser is the embedded server's user for the rig serving an offering (events.RigUsername), allowed only what
// package events lists for rig credentials (its rigs.go). Pass it in EmbeddedOptions.Users.
func RigUser(providerID, offeringID, password string) *server.User {
	publish, subscribe := events.RigPermissions(providerID, offeringID)
	return &server.User{
		Username: events.RigUsername(offeringID),
		Password: password,
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: publish},
			Subscribe: &server.SubjectPermission{Allow: subscribe},
		},
	}
}

// PlatformUser is a user with every permission in the platform's account, for the platform's own roles (web,
// gateway, meter) on a server that also lets rigs in: once a server has users, a client without credentials is
// refused.
func PlatformUser(name, password string) *server.User {
	return &server.User{Username: name, Password: password}
}

// RigAuthenticator lets in the platform's own user, in the platform's account, and every listed offering's rig, in
// RigsAccount, with the permissions PlatformUser and RigUser give, deciding at connect time: a rig listed after the
// server started needs no reload. It stores no rig password: it recomputes the one a rig presents from the
// platform's key and the issue of the rig's credential. Give it to StartEmbedded (EmbeddedOptions.Authenticator), which opens the rigs' account for it.
type RigAuthenticator struct {
	PlatformName, PlatformPassword string
	RigKey                         []byte
	// RigOf returns the provider of a listed (not delisted) offering and the issue of its rig's credential
	// (events.RigPasswordIssue): a rig presenting an earlier issue's password is refused.
	RigOf func(ctx context.Context, offeringID string) (providerID string, credentialIssue int, ok bool)
	// Refused, when set, says whether an offering's rig is shut out for now (riglimits.Watcher.Refused: it
	// published usage events faster than its limit); its right credential is then refused.
	Refused func(offeringID string) bool

	rigs atomic.Pointer[server.Account] // RigsAccount, once StartEmbedded opened it
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
	rigs := a.rigs.Load()
	if rigs == nil { // the server is still starting
		return false
	}
	offeringID, ok := strings.CutPrefix(o.Username, "rig-")
	if !ok || offeringID == "" || len(offeringID) > 128 || len(o.Password) != rigPasswordLen {
		return false
	}
	// The listing is read before the password is checked, since the password depends on its issue: whoever
	// reaches the entry point with a name and a password of the right length makes one lookup by primary key.
	// Every refusal looks the same to the client.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	providerID, issue, ok := a.RigOf(ctx, offeringID)
	if !ok {
		return false
	}
	want := events.RigPasswordIssue(a.RigKey, offeringID, issue)
	if subtle.ConstantTimeCompare([]byte(o.Password), []byte(want)) != 1 {
		return false
	}
	if a.Refused != nil && a.Refused(offeringID) {
		return false
	}
	u := RigUser(providerID, offeringID, want)
	u.Account = rigs
	c.RegisterUser(u)
	return true
}

// rigPasswordLen is the length of every password events.RigPasswordIssue derives.
const rigPasswordLen = 43

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
