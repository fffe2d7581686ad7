package main

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/gpumarket/gpumarket/services/events/natsserver"
	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/testlog"
)

// stopOrder is the order the platform's parts stop in, as docs/lifecycle.md lists them.
var stopOrder = []string{"web and gateway", "meter", "background rounds", "gateway's record", "nats", "database"}

// One part of a running platform fails: Run stops every other part, in order, and returns that part's error;
// once Close has returned nothing of the platform is left running.
func TestAFailingPartStopsThePlatformInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		// nats, when set, runs the platform on this test's NATS server rather than an embedded one.
		nats bool
		fail func(t *testing.T, p *Platform, n *revocableNATS)
		want string // in Run's error
	}{
		{"the NATS server refuses the platform's credential: the meter's stream of messages closes", true,
			func(t *testing.T, p *Platform, n *revocableNATS) { n.revoke(t) },
			"meter: metering: the consumer's message stream closed; the meter must restart"},
		{"the HTTP listener is closed under it", false, func(t *testing.T, p *Platform, _ *revocableNATS) {
			if err := p.listener.Close(); err != nil {
				t.Fatal(err)
			}
		}, "http: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, Roles{Web: true, Gateway: true, Meter: true})
			var n *revocableNATS
			if tc.nats {
				n = startRevocableNATS(t)
				cfg.NATSURL = n.platformURL
			}
			var logs testlog.Buffer
			before := goleak.IgnoreCurrent()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			url := p.URL()
			waitForStatus(t, http.DefaultClient, url+"/healthz", 0, done)

			tc.fail(t, p, n)
			var runErr error
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("Run did not return after a part failed:\n%s", logs.String())
			}
			if runErr == nil || !strings.Contains(runErr.Error(), tc.want) {
				t.Fatalf("Run returned %v; want the failing part's error, %q", runErr, tc.want)
			}
			// Run has stopped the parts: the platform no longer answers, though ctx has not ended.
			if res, err := (&http.Client{Timeout: time.Second}).Get(url + "/healthz"); err == nil {
				res.Body.Close()
				t.Fatalf("the platform still answers after Run returned: %d", res.StatusCode)
			}
			if ctx.Err() != nil {
				t.Fatal("ctx ended: the stop was not the failure's doing")
			}
			p.Close()
			if got := stoppedParts(logs.String()); !slices.Equal(got, stopOrder) {
				t.Fatalf("parts stopped in the order %q; want %q", got, stopOrder)
			}
			if !strings.Contains(logs.String(), "a part failed; stopping the others") {
				t.Fatalf("the log does not say which part failed:\n%s", logs.String())
			}
			if n != nil {
				// The test's server outlives the platform, as an external one would; what the platform made on it
				// (its streams) runs on it until it stops.
				n.srv.Shutdown()
				n.srv.WaitForShutdown()
			}
			goleak.VerifyNone(t, before)
		})
	}
}

var stoppedLine = regexp.MustCompile(`msg=stopped part=("[^"]*"|\S+)`)

// stoppedParts lists the parts a platform's log says stopped, in order.
func stoppedParts(log string) []string {
	var parts []string
	for _, m := range stoppedLine.FindAllStringSubmatch(log, -1) {
		parts = append(parts, strings.Trim(m[1], `"`))
	}
	return parts
}

// revocableNATS is a NATS server with the platform's user, whose operator can revoke the platform's credential.
type revocableNATS struct {
	srv         *server.Server
	platformURL string // with the platform's user and password
	password    string
	revoked     atomic.Bool
}

func startRevocableNATS(t *testing.T) *revocableNATS {
	t.Helper()
	n := &revocableNATS{password: randomToken()}
	n.srv = natstest.Start(t, natsserver.EmbeddedOptions{Authenticator: n})
	n.platformURL = withUserInfo(n.srv.ClientURL(), "gpumarket", n.password)
	return n
}

// Check implements server.Authentication: the platform's user with its password, until it is revoked.
func (n *revocableNATS) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if n.revoked.Load() || o.Username != "gpumarket" || o.Password != n.password {
		return false
	}
	c.RegisterUser(natsserver.PlatformUser("gpumarket", n.password))
	return true
}

// revoke refuses the platform's credential from now on and closes its connections: they reconnect, are refused,
// and give up (nats.go stops reconnecting after the same authorization error twice).
func (n *revocableNATS) revoke(t *testing.T) {
	t.Helper()
	n.revoked.Store(true)
	if _, err := natsserver.DisconnectUser(n.srv, "gpumarket"); err != nil {
		t.Fatal(err)
	}
}
