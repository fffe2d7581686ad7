package natsserver

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpumarket/gpumarket/services/events"
)

// RigsAccount (events.RigsAccount) is the NATS account rigs' users live in on the embedded server, apart from the
// platform's own (the server's global account, where the USAGE stream, the meter, the gateways and every platform
// process are). A rig sees nothing of the platform's account but what the two accounts share, each way:
// events.SharedWithRigs, which deploy/nats/nats.conf writes for a cluster (docs/usage-stream.md, "The rigs' entry
// point"). Within RIGS each rig's user may still publish only its own subjects (events.RigPermissions), so a rig
// cannot speak for another, and no subject of the platform's account (the JetStream API, the meter's fetches, the
// gateways' feeds) exists for it at all.
const RigsAccount = events.RigsAccount

// SystemAccount (events.SystemAccount) is the embedded server's system account when it lets rigs in (RigEntry):
// the account whose user may list and close any connection on the server (rigauth.Revoker).
const SystemAccount = events.SystemAccount

// RigEntry lets rigs into the embedded server by nats-server's auth callout, as deploy/nats/nats.conf does on a
// cluster: the platform's own users are let in by their passwords, every other name is put to the callout, which
// the platform answers (rigauth.Responder, on a connection of the platform's user) with a rig's user in RigsAccount
// or a refusal. The server holds no rig's password, and nothing of the platform's but the callout's public key.
type RigEntry struct {
	// PlatformUser and PlatformPassword are the platform's own user, in the platform's account (the global
	// account, where the USAGE stream is), which answers the callout.
	PlatformUser, PlatformPassword string
	// SystemUser and SystemPassword are a user of SystemAccount, which closes rigs' connections (rigauth.Revoker).
	SystemUser, SystemPassword string
	// Issuer is the public account key that signs the callout's answers (rigauth.IssuerPublicKey): an answer
	// signed by any other key is refused.
	Issuer string
}

// configure sets the server's options for the entry: the users, the system account and the callout.
func (e *RigEntry) configure(o *server.Options) {
	sys := server.NewAccount(SystemAccount)
	o.Accounts = append(o.Accounts, sys)
	o.SystemAccount = SystemAccount
	o.Users = append(o.Users, PlatformUser(e.PlatformUser, hashed(e.PlatformPassword)),
		&server.User{Username: e.SystemUser, Password: hashed(e.SystemPassword), Account: sys})
	o.AuthCallout = &server.AuthCallout{Issuer: e.Issuer, Account: server.DEFAULT_GLOBAL_ACCOUNT,
		AuthUsers: []string{e.PlatformUser, e.SystemUser}}
}

// hashed is a password as a bcrypt hash, the form nats-server compares a client's password against without holding
// it (and without warning at start that it holds plain passwords). The platform's users' passwords are random
// secrets made at start, which no guessing reaches, so the lowest cost serves: a connection's check takes about a
// millisecond. A password bcrypt cannot take (over 72 bytes) is kept as it is.
func hashed(password string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return password
	}
	return string(h)
}

// openRigsAccount registers RigsAccount on a started server with what it shares with the platform's account. It
// runs after the server started so that JetStream stays enabled for the global account, as a server with no other
// account enables it: the USAGE stream kept there by earlier versions is the same stream.
func openRigsAccount(s *server.Server) (*server.Account, error) {
	rigs, err := s.RegisterAccount(RigsAccount)
	if err != nil {
		return nil, fmt.Errorf("natsserver: register the %s account: %w", RigsAccount, err)
	}
	platform := s.GlobalAccount()
	for _, shared := range events.SharedWithRigs() {
		from, to := platform, rigs
		if shared.FromRigs {
			from, to = rigs, platform
		}
		var err error
		if shared.Service {
			if err = from.AddServiceExport(shared.Subject, []*server.Account{to}); err == nil {
				err = to.AddServiceImport(from, shared.Subject, "")
			}
		} else {
			if err = from.AddStreamExport(shared.Subject, []*server.Account{to}); err == nil {
				err = to.AddStreamImport(from, shared.Subject, "")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("natsserver: %s account: share %s: %w", RigsAccount, shared.Subject, err)
		}
	}
	return rigs, nil
}

// RigUser is a static user for the rig serving an offering (events.RigUsername), allowed only what package events
// lists for rig credentials (events.RigPermissions), for tests that need no callout: pass it in
// EmbeddedOptions.Users. The platform lets rigs in through RigEntry.
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

// DisconnectUser closes every connection of a user on this server, from the process that runs it, and returns how
// many it closed. The platform closes rigs' connections through the system account instead (rigauth.Revoker), the
// same way on the embedded server and a cluster.
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
