package routing

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// TestAConversationStaysOnItsRig: once an offering other than the cheapest has served a conversation, the
// conversation's next requests go to it first for ten minutes after the last, while it stays a candidate with
// room; other conversations, and the same one once forgotten, route by ask.
func TestAConversationStaysOnItsRig(t *testing.T) {
	t.Parallel()
	cheap, mid, dear := offering("cheap", "m", st, 100_000), offering("mid", "m", st, 150_000), offering("dear", "m", st, 200_000)
	b := setup(t, cheap, mid, dear)
	conv := Request{Model: "m", Conversation: "conv-1"}
	if got := b.pickIDs(t, conv); !slices.Equal(got, []string{"cheap", "mid", "dear"}) {
		t.Fatalf("a new conversation: %v", got)
	}
	b.r.Served("conv-1", "mid") // say the cheap one failed over to mid
	if got := b.pickIDs(t, conv); !slices.Equal(got, []string{"mid", "cheap", "dear"}) {
		t.Fatalf("the conversation's next request: %v", got)
	}
	if got := b.pickIDs(t, Request{Model: "m", Conversation: "conv-2"}); !slices.Equal(got, []string{"cheap", "mid", "dear"}) {
		t.Fatalf("another conversation: %v", got)
	}
	// Each request served renews the ten minutes.
	for range 3 {
		b.clock.Advance(9 * time.Minute)
		b.beatAll(cheap, mid, dear)
		if got := b.pickIDs(t, conv); got[0] != "mid" {
			t.Fatalf("9 minutes after the last request: %v", got)
		}
		b.r.Served("conv-1", "mid")
	}
	b.clock.Advance(ConversationTTL)
	b.beatAll(cheap, mid, dear)
	if got := b.pickIDs(t, conv); got[0] != "cheap" {
		t.Fatalf("ten minutes after the last request: %v", got)
	}
}

// beatAll records a heartbeat from each offering's rig now.
func (b bundle) beatAll(os ...catalog.Offering) {
	for _, o := range os {
		b.beat(o, 0, 8)
	}
}

// TestAConversationLeavesARigThatIsNoLongerEligible: the conversation's rig goes first only while routing would
// have returned it at all, with room, and standing as well as the others; otherwise the request routes as any
// other, and the rig that serves it becomes the conversation's.
func TestAConversationLeavesARigThatIsNoLongerEligible(t *testing.T) {
	t.Parallel()
	cheap, mid := offering("cheap", "m", st, 100_000), offering("mid", "m", st, 150_000)
	cases := []struct {
		name    string
		prepare func(t *testing.T, b bundle)
		req     Request
		want    []string
	}{
		{name: "eligible: it goes first", req: Request{Model: "m"}, want: []string{"mid", "cheap"}},
		{name: "silent: unhealthy", prepare: func(t *testing.T, b bundle) {
			b.clock.Advance(HeartbeatTimeout + time.Millisecond)
			b.beat(cheap, 0, 8)
		}, req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "its circuit open", prepare: func(t *testing.T, b bundle) {
			for range FailureThreshold {
				b.r.Failure("mid")
			}
		}, req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "at capacity", prepare: func(t *testing.T, b bundle) { b.beat(mid, 8, 8) }, req: Request{Model: "m"}, want: []string{"cheap", "mid"}},
		{name: "over the request's caps", req: Request{Model: "m", MaxPricePerMTok: 120_000}, want: []string{"cheap"}},
		{name: "left out by the preferences", req: Request{Model: "m", Preferences: &Preferences{Ignore: []string{"mid"}}}, want: []string{"cheap"}},
		{name: "out of the tier: traffic moved it to batch", prepare: func(t *testing.T, b bundle) {
			b.r.state("mid").mu.Lock()
			b.r.state("mid").tier = ba
			b.r.state("mid").mu.Unlock()
		}, req: Request{Model: "m"}, want: []string{"cheap"}},
		{name: "degraded by its uptime while the other is not", prepare: func(t *testing.T, b bundle) {
			b.withRecord(t, knownCounts{"mid": ok(90, 10, 0), "cheap": ok(100, 0, 0)})
		}, req: Request{Model: "m"}, want: []string{"cheap", "mid"}},
		{name: "an explicit order comes first", req: Request{Model: "m", Preferences: &Preferences{Order: []string{"cheap"}}},
			want: []string{"cheap", "mid"}},
		{name: "a pinned offering", req: Request{Model: "m", Offering: "cheap"}, want: []string{"cheap"}},
		{name: "an explicit sort comes first", req: Request{Model: "m", Preferences: &Preferences{Sort: SortPrice}},
			want: []string{"cheap", "mid"}},
		{name: "a request that opens its conversation is not looked up", req: Request{Model: "m", ConversationStarts: true},
			want: []string{"cheap", "mid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, cheap, mid)
			b.r.Served("conv", "mid")
			if c.prepare != nil {
				c.prepare(t, b)
			}
			req := c.req
			req.Conversation = "conv"
			if got := b.pickIDs(t, req); !slices.Equal(got, c.want) {
				t.Fatalf("Pick = %v, want %v", got, c.want)
			}
		})
	}
}

// TestTheConversationRecordIsBounded: the record holds at most maxConversations, and keeps the most recent.
func TestTheConversationRecordIsBounded(t *testing.T) {
	t.Parallel()
	var cv conversations
	now := newClock().Now()
	for i := range maxConversations + 1000 {
		cv.served(fmt.Sprint("conv-", i), "o", now)
	}
	if n := cv.len(); n > maxConversations {
		t.Fatalf("the record holds %d conversations, more than %d", n, maxConversations)
	}
	if cv.lookup(fmt.Sprint("conv-", maxConversations+999), now) != "o" || cv.lookup(fmt.Sprint("conv-", maxConversations/2+10), now) != "o" {
		t.Fatal("a recent conversation was forgotten")
	}
	if cv.lookup("conv-0", now) != "" {
		t.Fatal("the oldest conversation is still held")
	}
	// A conversation served again moves to the current generation and survives the next turnover.
	cv.served("conv-"+fmt.Sprint(maxConversations/2+10), "p", now)
	for i := range maxConversations / 2 {
		cv.served(fmt.Sprint("later-", i), "o", now)
	}
	if got := cv.lookup("conv-"+fmt.Sprint(maxConversations/2+10), now); got != "p" {
		t.Fatalf("a conversation served again: %q", got)
	}
}
