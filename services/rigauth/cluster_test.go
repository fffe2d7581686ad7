package rigauth_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/rigauth"
	"github.com/gpumarket/gpumarket/services/testlog"
)

// deployConfig is the NATS configuration deploy/compose.yaml and deploy/k8s run.
const deployConfig = "../../deploy/nats/nats.conf"

// TestClusterFromTheDeployConfigLetsRigsInByTheCallout: three nats-server nodes, each started in this process from
// deploy/nats/nats.conf itself with its environment as Compose gives it (free ports, a certificate made here), with
// the platform's responder on one node and its revoker on another. A rig reaches the entry point over wss:// with
// TLS on any node; what it may do, what is refused, and a re-issued credential closing its connections on all
// three nodes within a second are the embedded server's (checkRigEntry).
func TestClusterFromTheDeployConfigLetsRigsInByTheCallout(t *testing.T) {
	l := newListings()
	e, _ := startDeployCluster(t, l)
	checkRigEntry(t, e, l)
}

// startDeployCluster starts the three nodes and the platform's responder and revoker.
func startDeployCluster(t *testing.T, l *listings) (*entry, []*server.Server) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile := natstest.WriteCertificate(t, dir)
	issuer, err := rigauth.IssuerPublicKey(rigKey)
	if err != nil {
		t.Fatal(err)
	}
	ports := natstest.FreePorts(t, 12) // client, cluster, monitoring and the rigs' entry point, per node
	var routes []string
	for i := range 3 {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ports[3+i]))
	}
	const platformPassword, systemPassword = "pl4tform-password", "syst3m-password"
	e := &entry{rigOpts: []nats.Option{nats.RootCAs(certFile)}, platformUser: "gpumarket", replicas: 3}
	var nodes []*server.Server
	for i := range 3 {
		for name, value := range map[string]string{
			"NATS_SERVER_NAME":         fmt.Sprintf("nats-%d", i+1),
			"NATS_CLIENT_PORT":         strconv.Itoa(ports[i]),
			"NATS_CLUSTER_PORT":        strconv.Itoa(ports[3+i]),
			"NATS_HTTP_PORT":           strconv.Itoa(ports[6+i]),
			"NATS_RIGS_PORT":           strconv.Itoa(ports[9+i]),
			"NATS_ROUTES":              "[" + strings.Join(routes, ", ") + "]",
			"NATS_STORE_DIR":           filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)),
			"NATS_RIGS_TLS_CERT":       certFile,
			"NATS_RIGS_TLS_KEY":        keyFile,
			"NATS_PLATFORM_PASSWORD":   platformPassword,
			"NATS_SYSTEM_PASSWORD":     systemPassword,
			"NATS_AUTH_CALLOUT_ISSUER": issuer,
		} {
			t.Setenv(name, value)
		}
		opts, err := server.ProcessConfigFile(deployConfig)
		if err != nil {
			t.Fatalf("%s for node %d: %v", deployConfig, i+1, err)
		}
		opts.NoSigs, opts.NoLog = true, true
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("node %d is not ready for clients", i+1)
		}
		nodes = append(nodes, s)
		e.rigURLs = append(e.rigURLs, "wss://127.0.0.1:"+strconv.Itoa(ports[9+i]))
		e.platformURLs = append(e.platformURLs, fmt.Sprintf("nats://gpumarket:%s@127.0.0.1:%d", platformPassword, ports[i]))
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(nodes, (*server.Server).JetStreamIsLeader) {
		if time.Now().After(deadline) {
			t.Fatal("the three NATS nodes elected no JetStream leader within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The platform's responder on the first node, its revoker (the system account's user) on the second.
	pnc, err := nats.Connect(e.platformURLs[0], nats.Name("platform-rigauth"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pnc.Close)
	responder := l.responder()
	responder.Log = testlog.Discard()
	if responder.Issuer, err = rigauth.Issuer(rigKey); err != nil {
		t.Fatal(err)
	}
	if _, err := responder.Serve(pnc); err != nil {
		t.Fatal(err)
	}
	snc, err := nats.Connect(fmt.Sprintf("nats://system:%s@127.0.0.1:%d", systemPassword, ports[1]), nats.Name("platform-revoker"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snc.Close)
	e.revoker = &rigauth.Revoker{NC: snc}
	// The callout's subscription reaches the other nodes through the routes: wait until a rig gets in on each.
	for i := range 3 {
		for deadline := time.Now().Add(10 * time.Second); ; {
			r, err := e.connectRig(t, i, "prov-2", "off-3", l.password("off-3"))
			if err == nil {
				r.nc.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d lets no rig in: %v", i+1, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return e, nodes
}
