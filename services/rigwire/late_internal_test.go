package rigwire

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/events/natsserver"
)

// A rig that accepts a call only after the gateway gave up on it (a rig too busy to take it within AcceptTimeout)
// is told to stop at once: it does not serve a request no one waits for, which the meter would find no record of.
func TestALateAcceptanceIsCanceled(t *testing.T) {
	t.Parallel()
	s, err := natsserver.StartEmbedded(natsserver.EmbeddedOptions{StoreDir: t.TempDir(),
		Users: []*server.User{natsserver.PlatformUser("platform", "secret")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	gw, err := nats.Connect(s.ClientURL(), nats.UserInfo("platform", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	rig, err := nats.Connect(s.ClientURL(), nats.UserInfo("platform", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer rig.Close()
	control := events.Child(events.RigControlSubject("p1", "o1", "agent"), "1")
	controls, err := rig.SubscribeSync(control)
	if err != nil {
		t.Fatal(err)
	}
	// The rig takes the call, and accepts it 500 ms later: after the gateway's 200 ms.
	if _, err := rig.Subscribe(events.RigCallRequestSubject("p1", "o1"), func(m *nats.Msg) {
		time.Sleep(500 * time.Millisecond)
		accept := appendString(binary.AppendUvarint([]byte{flagAccept}, 0), control)
		_ = rig.Publish(m.Reply, accept)
	}); err != nil {
		t.Fatal(err)
	}
	rig.Flush()
	c, err := NewCaller(gw, Options{AcceptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(t.Context(), "p1", "o1", "/v1/chat/completions", nil, []byte("{}")); !errors.Is(err, ErrNoRig) {
		t.Fatalf("a call not accepted in time: %v, want ErrNoRig", err)
	}
	m, err := controls.NextMsg(2 * time.Second)
	if err != nil || len(m.Data) != 1 || m.Data[0] != ctlCancel {
		t.Fatalf("the late acceptance got %v, %v; want a cancel", m, err)
	}
}
