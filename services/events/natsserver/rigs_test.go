package natsserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpumarket/gpumarket/services/events"
)

func TestRigUserMayPublishOnlyItsOwnSubjects(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	rig := RigUser("prov-1", "off-1", events.RigPassword(key, "off-1"))
	other := RigUser("prov-1", "off-2", events.RigPassword(key, "off-2"))
	s, _ := startServer(t, EmbeddedOptions{
		StoreDir: t.TempDir(),
		Users:    []*server.User{rig, other, PlatformUser("platform", "platform-secret")},
	})
	checkRigPermissions(t, s, rig)
}

func checkRigPermissions(t *testing.T, s *server.Server, rig *server.User) {
	t.Helper()
	ctx := t.Context()

	platformNC, platformJS, _ := connectAs(t, s.ClientURL(), "platform", "platform-secret", "")
	heartbeats, err := platformNC.SubscribeSync(events.Below(events.HeartbeatPrefix))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := platformJS.CreateStream(ctx, jetstream.StreamConfig{
		Name:     "USAGE",
		Subjects: []string{"usage.>"},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}

	rigNC, rigJS, refusals := connectAs(t, s.ClientURL(), rig.Username, rig.Password, events.RigInboxPrefix("prov-1", "off-1"))

	ack, err := rigJS.Publish(ctx, "usage.prov-1.off-1", []byte(`{}`), jetstream.WithMsgID("evt-1"))
	if err != nil {
		t.Fatalf("rig publishing on its own usage subject: %v", err)
	}
	if ack.Stream != "USAGE" || ack.Sequence != 1 {
		t.Errorf("ack %+v, want sequence 1 of USAGE", ack)
	}
	if err := rigNC.Publish(events.HeartbeatSubject("prov-1", "off-1"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if hb, err := heartbeats.NextMsg(2 * time.Second); err != nil || hb.Subject != "heartbeat.prov-1.off-1" {
		t.Errorf("the platform's heartbeat subscription got %v, %v; want the rig's heartbeat", hb, err)
	}

	asked, err := rigNC.SubscribeSync(events.HeartbeatRequestSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := rigNC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := platformNC.Publish(events.HeartbeatRequestSubject, nil); err != nil {
		t.Fatal(err)
	}
	if msg, err := asked.NextMsg(2 * time.Second); err != nil || msg.Subject != events.HeartbeatRequestSubject {
		t.Errorf("the rig's subscription to heartbeat requests got %v, %v; want the platform's request", msg, err)
	}

	for _, subject := range []string{
		events.HeartbeatRequestSubject, // asking every other rig to beat is the gateways' business
		"usage.prov-1.off-2",           // another offering of the same provider
		"usage.prov-2.off-1",           // the same offering id under another provider
		"heartbeat.prov-1.off-2",       // another offering's heartbeat
		"$JS.API.STREAM.INFO.USAGE",    // the JetStream API
	} {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := rigJS.Publish(short, subject, []byte(`{}`))
		cancel()
		if err == nil {
			t.Errorf("rig published on %s: want a refusal", subject)
		}
		refusals.expect(t, "Publish", subject)
	}

	for _, subject := range []string{"usage.>", "_INBOX.>", "heartbeat.>", events.RigInboxPrefix("prov-1", "off-2") + ".>"} {
		if _, err := rigNC.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		refusals.expect(t, "Subscription", subject)
	}

	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages, want only the rig's own event", info.State.Msgs)
	}
}

// TestRigsAccountSharesOnlyUsageAndHeartbeats: the rigs' account is a boundary of its own, whatever a rig's user
// may do within it. A user of that account with every permission there can publish usage events to the
// platform's stream (and get their acknowledgements) and heartbeats to the platform, and receives the platform's
// heartbeat requests; and nothing else crosses either way: not the JetStream API, not any other subject the rig
// publishes, not any other subject the platform publishes.
func TestRigsAccountSharesOnlyUsageAndHeartbeats(t *testing.T) {
	t.Parallel()
	auth := &accountAuthenticator{}
	s, _ := startServer(t, EmbeddedOptions{StoreDir: t.TempDir(), Authenticator: auth})
	rigs, err := s.LookupAccount(RigsAccount)
	if err != nil {
		t.Fatal(err)
	}
	auth.rigs.Store(rigs)
	ctx := t.Context()

	platformNC, platformJS, _ := connectAs(t, s.ClientURL(), "platform", "-", "")
	if _, err := platformJS.CreateStream(ctx, jetstream.StreamConfig{Name: "USAGE", Subjects: []string{"usage.>"}}); err != nil {
		t.Fatal(err)
	}
	platformSees, err := platformNC.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	rigNC, rigJS, _ := connectAs(t, s.ClientURL(), "anyrig", "-", "")
	rigSees, err := rigNC.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{platformNC, rigNC} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}

	// What crosses.
	ack, err := rigJS.Publish(ctx, "usage.prov-1.off-1", []byte("rig: usage"), jetstream.WithMsgID("evt-1"))
	if err != nil || ack.Stream != "USAGE" {
		t.Fatalf("a usage event from the rigs' account: %+v, %v; want the stream's acknowledgement", ack, err)
	}
	if err := rigNC.Publish("heartbeat.prov-1.off-1", []byte("rig: heartbeat")); err != nil {
		t.Fatal(err)
	}
	if err := platformNC.Publish(events.HeartbeatRequestSubject, []byte("platform: beat now")); err != nil {
		t.Fatal(err)
	}
	// What must not: the rig's other subjects, and the platform's.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := rigJS.Stream(short, "USAGE"); err == nil {
		t.Error("the rigs' account reached the platform's JetStream API")
	}
	cancel()
	for _, subject := range []string{"feed.committed", "_INBOX.platform.reply", "heartbeat_request.extra", "usage.prov-1"} {
		if err := rigNC.Publish(subject, []byte("rig: other")); err != nil {
			t.Fatal(err)
		}
		if err := platformNC.Publish(subject, []byte("platform: other")); err != nil {
			t.Fatal(err)
		}
	}
	for _, nc := range []*nats.Conn{platformNC, rigNC} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)

	got := func(sub *nats.Subscription, from string) map[string]bool {
		seen := map[string]bool{}
		for {
			m, err := sub.NextMsg(100 * time.Millisecond)
			if err != nil {
				return seen
			}
			// Each side's own messages come back to its own subscription, and the JetStream traffic of
			// each side's own calls; only what came from the other account counts here.
			if strings.HasPrefix(string(m.Data), from) {
				seen[m.Subject] = true
			}
		}
	}
	if seen := got(platformSees, "rig:"); !seen["usage.prov-1.off-1"] || !seen["heartbeat.prov-1.off-1"] || len(seen) != 2 {
		t.Errorf("the platform's account saw %v from the rigs', want only the usage event and the heartbeat", seen)
	}
	if seen := got(rigSees, "platform:"); !seen[events.HeartbeatRequestSubject] || len(seen) != 1 {
		t.Errorf("the rigs' account saw %v from the platform's, want only the heartbeat request", seen)
	}
}

// accountAuthenticator lets "platform" into the platform's account and "anyrig" into the rigs' account with every
// permission there, to test the account's boundary apart from the rigs' permissions.
type accountAuthenticator struct {
	rigs atomic.Pointer[server.Account]
}

func (a *accountAuthenticator) Check(c server.ClientAuthentication) bool {
	switch c.GetOpts().Username {
	case "platform":
		c.RegisterUser(&server.User{Username: "platform"})
		return true
	case "anyrig":
		if rigs := a.rigs.Load(); rigs != nil {
			c.RegisterUser(&server.User{Username: "anyrig", Account: rigs})
			return true
		}
	}
	return false
}

func TestServerWithUsersRefusesAnonymousAndWrongPasswords(t *testing.T) {
	t.Parallel()
	s, _ := startServer(t, EmbeddedOptions{
		StoreDir: t.TempDir(),
		Users:    []*server.User{RigUser("prov-1", "off-1", "right"), PlatformUser("platform", "platform-secret")},
	})
	for name, opts := range map[string][]nats.Option{
		"no credentials":      nil,
		"wrong rig password":  {nats.UserInfo(events.RigUsername("off-1"), "wrong")},
		"unknown user":        {nats.UserInfo("rig-off-9", "right")},
		"platform, wrong key": {nats.UserInfo("platform", "right")},
	} {
		nc, err := nats.Connect(s.ClientURL(), append(opts, nats.NoReconnect())...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected, want an authorization error", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: error %v, want an authorization error", name, err)
		}
	}
}

// connectAs connects with a user and password (and an inbox prefix, unless empty), closing at the test's end. The
// permission violations the server reports to the client arrive on the returned channel.
func connectAs(t *testing.T, url, user, password, inbox string) (*nats.Conn, jetstream.JetStream, violations) {
	t.Helper()
	refused := make(violations, 16)
	opts := []nats.Option{nats.UserInfo(user, password), nats.Name(user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				refused <- err
			}
		})}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, refused
}

// violations are the permission violations a server sent a client, in order.
type violations chan error

// expect waits for the server's refusal of an operation ("Publish" or "Subscription") on a subject.
func (v violations) expect(t *testing.T, op, subject string) {
	t.Helper()
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	select {
	case err := <-v:
		if !strings.Contains(err.Error(), want) {
			t.Errorf("violation %q, want %q", err, want)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("the server did not refuse: %s", want)
	}
}

func TestDisconnectUserClosesEveryConnectionOfThatUserOnly(t *testing.T) {
	t.Parallel()
	s, _ := startServer(t, EmbeddedOptions{
		StoreDir: t.TempDir(),
		Users:    []*server.User{RigUser("prov-1", "off-1", "one"), RigUser("prov-1", "off-2", "two")},
	})
	var conns []*nats.Conn
	for range 3 {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(events.RigUsername("off-1"), "one"), nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns = append(conns, nc)
	}
	other, err := nats.Connect(s.ClientURL(), nats.UserInfo(events.RigUsername("off-2"), "two"), nats.NoReconnect())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	n, err := DisconnectUser(s, events.RigUsername("off-1"))
	if err != nil || n != 3 {
		t.Fatalf("DisconnectUser closed %d (%v), want the 3 connections of rig-off-1", n, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, nc := range conns {
		for !nc.IsClosed() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !nc.IsClosed() {
			t.Error("a connection of rig-off-1 is still open")
		}
	}
	if err := other.Flush(); err != nil || !other.IsConnected() {
		t.Errorf("rig-off-2 lost its connection: %v", err)
	}
}

func TestRigPermissionsPublishTheUsageSubject(t *testing.T) {
	publish, _ := events.RigPermissions("prov-1", "off-1")
	if publish[0] != events.UsageSubject("prov-1", "off-1") {
		t.Fatalf("a rig may publish %q for its usage, but its usage subject is %q", publish[0], events.UsageSubject("prov-1", "off-1"))
	}
}

// The rigs' entry holds the platform's users' passwords as bcrypt hashes only (natstest's servers, which every
// test of the callout starts, connect with the plain ones), and one over bcrypt's 72 bytes as it is.
func TestTheRigEntryHoldsNoPlainPassword(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 73)
	var o server.Options
	(&RigEntry{PlatformUser: "platform", PlatformPassword: "platform-secret", SystemUser: "system", SystemPassword: long}).configure(&o)
	if len(o.Users) != 2 {
		t.Fatalf("%d users, want the platform's and the system's", len(o.Users))
	}
	platform, system := o.Users[0], o.Users[1]
	if !strings.HasPrefix(platform.Password, "$2a$") || strings.Contains(platform.Password, "platform-secret") {
		t.Errorf("the platform's password is held as %q, want a bcrypt hash", platform.Password)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(platform.Password), []byte("platform-secret")); err != nil {
		t.Errorf("the hash does not take the password: %v", err)
	}
	if system.Password != long {
		t.Errorf("a password bcrypt cannot take is held as %q", system.Password)
	}
}
