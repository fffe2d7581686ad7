package rigauth_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/events/natstest"
)

// TestEmbeddedServerLetsRigsInByTheCallout: the embedded server (natsserver.RigEntry) with the platform's responder
// admits a listed rig with its own password over wss:// (natsserver.TLSEntry) and only its own subjects, refuses
// every other, and a revoked rig's connections are closed through the system account.
func TestEmbeddedServerLetsRigsInByTheCallout(t *testing.T) {
	t.Parallel()
	l := newListings()
	cert, key := natstest.WriteCertificate(t, t.TempDir())
	port := natstest.FreePorts(t, 1)[0]
	e := natstest.StartRigEntry(t, natsserver.EmbeddedOptions{
		RigsTLS: &natsserver.TLSEntry{Host: "127.0.0.1", Port: port, CertFile: cert, KeyFile: key}}, l.responder())
	checkRigEntry(t, &entry{rigURLs: []string{"wss://127.0.0.1:" + strconv.Itoa(port)}, rigOpts: []nats.Option{nats.RootCAs(cert)},
		platformURLs: []string{e.PlatformURL}, platformUser: "platform", revoker: e.Revoker, replicas: 1}, l)
	conns, err := e.Server.Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	rigs := 0
	for _, c := range conns.Conns {
		if strings.HasPrefix(c.AuthorizedUser, "rig-") {
			rigs++
			if c.Account != natsserver.RigsAccount {
				t.Errorf("rig %s is in account %q, want %q", c.AuthorizedUser, c.Account, natsserver.RigsAccount)
			}
		}
	}
	if rigs != 2 { // off-1, and off-2 with its new password
		t.Errorf("%d rigs connected, want 2", rigs)
	}
}
