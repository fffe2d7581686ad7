package agent

import (
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"
)

// TestStreamRefusalIsLoggedWithTheRigsSubjectAndKeptForLater: the usage stream holds at most 2 unmetered events of
// this rig. The agent serves 4 requests; the stream takes 2 and refuses the others, which the agent keeps in its
// outbox and logs, naming its subject and offering. Once the meter has taken the first two, the other two go.
func TestStreamRefusalIsLoggedWithTheRigsSubjectAndKeptForLater(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{pending: 2})
	for _, id := range []string{"req_r1", "req_r2", "req_r3", "req_r4"} {
		readAll(t, r.post(t, "/v1/chat/completions", r.ticket(t, id), `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
	}
	waitFor(t, "the refusal in the log", func() bool { return strings.Contains(r.logs.String(), "refuses this rig's events") })
	var line string
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(l, "refuses this rig's events") {
			line = l
			break
		}
	}
	for _, want := range []string{"subject=usage.prov-1.off-1", "offering=off-1", "reason=rig_pending_limit"} {
		if !strings.Contains(line, want) {
			t.Errorf("the refusal %q lacks %s", line, want)
		}
	}
	if n := r.streamCount(t); n != 2 {
		t.Fatalf("the stream holds %d of the rig's events, want its limit of 2", n)
	}
	if st := r.agent.Stats(); st.Outbox != 2 || st.Acked != 2 {
		t.Fatalf("stats %+v, want 2 acknowledged and 2 kept in the outbox", st)
	}

	// The meter meters the first two: the stream takes the others.
	cons, err := r.js.Consumer(t.Context(), events.UsageStream, events.UsageConsumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2)
	if err != nil {
		t.Fatal(err)
	}
	var first []string
	for msg := range batch.Messages() {
		ev, err := usage.Decode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, ev.Data.RequestID)
		if err := msg.DoubleAck(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the outbox to drain", func() bool { return r.agent.Stats().Outbox == 0 })
	if st := r.agent.Stats(); st.Acked != 4 {
		t.Errorf("%d acknowledged, want all 4", st.Acked)
	}
	batch, err = cons.Fetch(2)
	if err != nil {
		t.Fatal(err)
	}
	var rest []string
	for msg := range batch.Messages() {
		ev, _ := usage.Decode(msg.Data())
		rest = append(rest, ev.Data.RequestID)
	}
	if got := strings.Join(append(first, rest...), ","); got != "req_r1,req_r2,req_r3,req_r4" {
		t.Errorf("the meter received %s, want each request once, in order", got)
	}
}
