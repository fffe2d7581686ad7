package rigauth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/rigauth"
)

// rigKey derives the rigs' passwords and the callout's issuer in these tests.
var rigKey = []byte("0123456789abcdef0123456789abcdef")

// listings stand for the catalog the platform's responder reads: each offering's provider and the issue of its
// rig's credential, and the rigs shut out.
type listings struct {
	mu      sync.Mutex
	rigs    map[string]listing
	shutOut map[string]bool
	lookups map[string]int // of each offering, by the responder
}

type listing struct {
	provider string
	issue    int
}

func newListings() *listings {
	return &listings{rigs: map[string]listing{
		"off-1": {"prov-1", 1}, "off-2": {"prov-1", 1}, "off-3": {"prov-2", 1}, "off-4": {"prov-2", 1},
	}, shutOut: map[string]bool{}, lookups: map[string]int{}}
}

func (l *listings) rigOf(_ context.Context, offeringID string) (string, int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lookups[offeringID]++
	r, ok := l.rigs[offeringID]
	return r.provider, r.issue, ok
}

func (l *listings) refused(offeringID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shutOut[offeringID]
}

func (l *listings) password(offeringID string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return events.RigPasswordIssue(rigKey, offeringID, l.rigs[offeringID].issue)
}

func (l *listings) responder() *rigauth.Responder {
	return &rigauth.Responder{RigKey: rigKey, RigOf: l.rigOf, Refused: l.refused}
}

// entry is a NATS server or cluster that lets rigs in through the platform's responder.
type entry struct {
	// rigURLs are where rigs connect, one per node; rigOpts what else they need (the entry point's CA).
	rigURLs []string
	rigOpts []nats.Option
	// platformURLs carry the platform's user and password, one per node.
	platformURLs []string
	platformUser string
	revoker      *rigauth.Revoker
	replicas     int // of the usage stream
}

// rig is one rig's connection and what the server told it.
type rig struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	refused chan error    // permission violations
	closed  chan struct{} // closed when the connection is
}

// connectRig connects as the rig serving an offering, to one node, with a password; it does not reconnect.
func (e *entry) connectRig(t *testing.T, node int, provider, offering, password string) (*rig, error) {
	t.Helper()
	r := &rig{refused: make(chan error, 16), closed: make(chan struct{})}
	opts := append([]nats.Option{nats.UserInfo(events.RigUsername(offering), password), nats.NoReconnect(),
		nats.CustomInboxPrefix(events.RigInboxPrefix(provider, offering)),
		nats.ClosedHandler(func(*nats.Conn) { close(r.closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				r.refused <- err
			}
		})}, e.rigOpts...)
	nc, err := nats.Connect(e.rigURLs[node], opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	r.nc = nc
	if r.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return r, nil
}

// expectRefusal waits for the server's refusal of an operation ("Publish" or "Subscription") on a subject.
func (r *rig) expectRefusal(t *testing.T, op, subject string) {
	t.Helper()
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	select {
	case err := <-r.refused:
		if !strings.Contains(err.Error(), want) {
			t.Errorf("violation %q, want %q", err, want)
		}
	case <-time.After(2 * time.Second):
		t.Errorf("the server did not refuse: %s", want)
	}
}

// checkRigEntry runs the rigs' entry point through what a rig and the platform do, and what a rig must not.
func checkRigEntry(t *testing.T, e *entry, l *listings) {
	ctx := t.Context()
	nodes := len(e.rigURLs)

	// The platform, on the last node: the usage stream, and everything that reaches its account from rigs.
	platform, err := nats.Connect(e.platformURLs[nodes-1], nats.Name("platform"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(platform.Close)
	pjs, err := jetstream.New(platform)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := pjs.CreateStream(ctx, jetstream.StreamConfig{Name: events.UsageStream, Subjects: []string{events.Below(events.UsagePrefix)},
		Storage: jetstream.FileStorage, Replicas: e.replicas})
	if err != nil {
		t.Fatal(err)
	}
	heard, err := platform.SubscribeSync(">") // every subject of the platform's account
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.Flush(); err != nil {
		t.Fatal(err)
	}

	// A listed rig gets in with its own password, on the first node.
	one, err := e.connectRig(t, 0, "prov-1", "off-1", l.password("off-1"))
	if err != nil {
		t.Fatalf("a listed rig with its own password: %v", err)
	}
	calls, err := one.nc.SubscribeSync(events.RigCallSubject("prov-1", "off-1"))
	if err != nil {
		t.Fatal(err)
	}
	acks, err := one.nc.SubscribeSync(events.Below(events.RigCallSubject("prov-1", "off-1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := one.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ack, err := one.js.Publish(ctx, events.UsageSubject("prov-1", "off-1"), []byte("usage of off-1"), jetstream.WithMsgID("evt-1"))
	if err != nil || ack.Stream != events.UsageStream || ack.Sequence != 1 {
		t.Fatalf("the rig's own usage event: %+v, %v; want the stream's first", ack, err)
	}
	for subject, data := range map[string]string{
		events.HeartbeatSubject("prov-1", "off-1"):            "heartbeat of off-1",
		events.RigAnswerSubject("prov-1", "off-1", "g1", "1"): "reply of off-1",
	} {
		if err := one.nc.Publish(subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	// What the rig must not do: speak for another rig, reach the JetStream API, listen to another's calls.
	for _, subject := range []string{events.UsageSubject("prov-1", "off-2"), events.UsageSubject("prov-2", "off-1"), events.HeartbeatSubject("prov-1", "off-2"),
		events.RigAnswerSubject("prov-1", "off-2", "g1", "1"), events.RigCallSubject("prov-1", "off-2")} {
		if err := one.nc.Publish(subject, []byte("forged by off-1")); err != nil {
			t.Fatal(err)
		}
		one.expectRefusal(t, "Publish", subject)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := one.js.Stream(short, events.UsageStream); err == nil {
		t.Error("the rig reached the JetStream API")
	}
	cancel()
	one.expectRefusal(t, "Publish", jetstream.DefaultAPIPrefix+"STREAM.INFO."+events.UsageStream)
	for _, subject := range []string{events.RigCallSubject("prov-1", "off-2"), events.Below(events.UsagePrefix), "_INBOX.>",
		events.Below(events.HeartbeatPrefix)} {
		if _, err := one.nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		one.expectRefusal(t, "Subscription", subject)
	}

	// The platform calls the rig, and calls another; the rig receives its own only.
	for _, subject := range []string{events.RigCallSubject("prov-1", "off-1"), events.Child(events.RigCallSubject("prov-1", "off-1"), "ack"),
		events.RigCallSubject("prov-1", "off-2")} {
		if err := platform.Publish(subject, []byte("call to "+subject)); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := calls.NextMsg(2 * time.Second); err != nil || string(m.Data) != "call to "+events.RigCallSubject("prov-1", "off-1") {
		t.Errorf("the rig's call: %v, %v", m, err)
	}
	if m, err := acks.NextMsg(2 * time.Second); err != nil || m.Subject != events.Child(events.RigCallSubject("prov-1", "off-1"), "ack") {
		t.Errorf("the rig's call acknowledgement: %v, %v", m, err)
	}

	// What the platform's account received from rigs: the rig's own usage, heartbeat and reply, nothing forged.
	got := map[string]string{}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && len(got) < 3 {
		m, err := heard.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		if strings.Contains(string(m.Data), "off-1") && !strings.HasPrefix(string(m.Data), "call to") {
			got[m.Subject] = string(m.Data)
		}
	}
	time.Sleep(200 * time.Millisecond) // anything forged would have arrived by now
	for m, err := heard.NextMsg(10 * time.Millisecond); err == nil; m, err = heard.NextMsg(10 * time.Millisecond) {
		if strings.Contains(string(m.Data), "forged") {
			got[m.Subject] = string(m.Data)
		}
	}
	want := map[string]string{events.UsageSubject("prov-1", "off-1"): "usage of off-1",
		events.HeartbeatSubject("prov-1", "off-1"): "heartbeat of off-1", events.RigAnswerSubject("prov-1", "off-1", "g1", "1"): "reply of off-1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the platform received %v from the rigs, want %v", got, want)
	}
	if info, err := stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("the usage stream holds %v (%v), want only the rig's own event", info, err)
	}

	// Refused: a wrong password, another rig's, an unlisted offering, a rig shut out, the platform's user with a
	// rig's password; none of them reaches the platform.
	l.mu.Lock()
	l.shutOut["off-4"] = true
	l.mu.Unlock()
	for name, c := range map[string]struct{ offering, password string }{
		"wrong password":          {"off-1", strings.Repeat("x", 43)},
		"another rig's password":  {"off-1", l.password("off-2")},
		"another key's password":  {"off-1", events.RigPassword([]byte("another platform's key, 32 bytes"), "off-1")},
		"an unlisted offering":    {"off-9", events.RigPassword(rigKey, "off-9")},
		"a rig shut out":          {"off-4", l.password("off-4")},
		"a password of no length": {"off-1", ""},
		"a short password":        {"off-5", "short"},
	} {
		if r, err := e.connectRig(t, 0, "prov-1", c.offering, c.password); err == nil {
			r.nc.Close()
			t.Errorf("%s: connected, want an authorization error", name)
		} else if !refusedAfterHandshake(err) {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	l.mu.Lock()
	if n := l.lookups["off-5"]; n != 0 {
		t.Errorf("a password no rig has the length of made %d lookups of the listing, want none", n)
	}
	l.mu.Unlock()
	if nc, err := nats.Connect(strings.Replace(e.rigURLs[0], "://", "://"+e.platformUser+":"+l.password("off-1")+"@", 1),
		append([]nats.Option{nats.NoReconnect()}, e.rigOpts...)...); err == nil {
		nc.Close()
		t.Error("the platform's user name with a rig's password got in")
	}

	// Re-issuing a rig's credential closes its connections on every node within a second; the old password is
	// refused at once, the new one lets it in.
	old := l.password("off-2")
	checkRevoked(t, e, l, "prov-1", "off-2", func() { l.rigs["off-2"] = listing{"prov-1", 2} })
	if r, err := e.connectRig(t, 0, "prov-1", "off-2", old); err == nil {
		r.nc.Close()
		t.Error("rig off-2 got in with its old password")
	}
	if _, err := e.connectRig(t, nodes-1, "prov-1", "off-2", l.password("off-2")); err != nil {
		t.Errorf("rig off-2 with its new password: %v", err)
	}
	// A rig shut out (riglimits) and a delisted offering's rig likewise.
	checkRevoked(t, e, l, "prov-2", "off-3", func() { l.shutOut["off-3"] = true })
	checkRevoked(t, e, l, "prov-1", "off-1", func() { delete(l.rigs, "off-1") })
	l.mu.Lock()
	l.rigs["off-1"] = listing{"prov-1", 1} // listed again, for what follows
	l.mu.Unlock()

	// The platform's user is untouched, and a rig let in again publishes as before.
	if !platform.IsConnected() {
		t.Error("the platform lost its connection")
	}
	again, err := e.connectRig(t, 0, "prov-1", "off-1", l.password("off-1"))
	if err != nil {
		t.Fatalf("rig off-1 listed again: %v", err)
	}
	ack, err = again.js.Publish(ctx, events.UsageSubject("prov-1", "off-1"), []byte("usage of off-1, again"), jetstream.WithMsgID("evt-2"))
	if err != nil || ack.Sequence != 2 {
		t.Errorf("rig off-1's second event: %+v, %v", ack, err)
	}
}

// checkRevoked connects the rig serving an offering to every node, changes the listings as revoke says, and has the
// platform's revoker close the rig's connections: each must be closed within a second, and the rig's current
// password refused on every node afterwards.
func checkRevoked(t *testing.T, e *entry, l *listings, provider, offering string, revoke func()) {
	t.Helper()
	nodes := len(e.rigURLs)
	password := l.password(offering)
	var open []*rig
	for node := range nodes {
		r, err := e.connectRig(t, node, provider, offering, password)
		if err != nil {
			t.Fatalf("rig %s on node %d: %v", offering, node, err)
		}
		open = append(open, r)
	}
	start := time.Now()
	l.mu.Lock()
	revoke()
	l.mu.Unlock()
	closed, err := e.revoker.Disconnect(t.Context(), events.RigUsername(offering))
	if err != nil || closed < nodes {
		t.Errorf("Disconnect closed %d connections of %s (%v), want %d", closed, offering, err, nodes)
	}
	for node, r := range open {
		select {
		case <-r.closed:
		case <-time.After(time.Second - time.Since(start)):
			t.Errorf("rig %s's connection to node %d is open a second after it was revoked", offering, node)
		}
	}
	t.Logf("rig %s's %d connections closed in %s", offering, nodes, time.Since(start).Round(time.Millisecond))
	for node := range nodes {
		if r, err := e.connectRig(t, node, provider, offering, password); err == nil {
			r.nc.Close()
			t.Errorf("node %d let revoked rig %s in", node, offering)
		}
	}
}

// refusedAfterHandshake says whether a connection failed as a refused one does: an authorization error, or over
// WebSocket, where the server closes the connection once it has refused it, a connection closed after the TLS
// handshake succeeded (the same path lets the right password in).
func refusedAfterHandshake(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authoriz") ||
		strings.Contains(err.Error(), "connection closed by remote after TLS handshake")
}
