package routing

import (
	"sync"
	"time"
)

// Conversations stay on one rig (docs/gateway.md, "One conversation, one rig"). An inference server keeps the
// prompt it has just computed (vLLM's prefix cache, llama.cpp's slots), so the next turn of a conversation,
// which repeats it, starts sooner and costs the rig less on the rig that served the last one. The gateway names
// each request's conversation (Request.Conversation); once an offering has served it (Served), Pick puts that
// offering first for the conversation's next requests while it is a candidate (the tier, the caps, the
// preferences, health and the circuit admit it), has room and stands as well by its uptime as the best of the
// others; otherwise it routes as it would have, and the offering that serves becomes the conversation's. A
// conversation no request has come from for ConversationTTL is forgotten. A request's own explicit order
// (provider.order or provider.sort) comes before its conversation's rig, and a request that opens its
// conversation (Request.ConversationStarts) routes as any other: identical one-off requests are balanced as
// ever, not piled on the rig that served the first of them.
//
// The record is this router's, in memory: each gateway replica keeps its own, and a restart forgets it. That is
// acceptable because it only orders candidates that routing would have returned anyway: a conversation whose
// requests reach different replicas is served by at most one rig per replica, and a forgotten one by a new rig,
// whose cache then fills on the first turn. Nothing is billed or promised on it.

const (
	// ConversationTTL is how long a conversation keeps its rig after its last request.
	ConversationTTL = 10 * time.Minute
	// maxConversations bounds the record: it holds at most this many conversations, the least recent forgotten
	// first, a half at a time.
	maxConversations = 1 << 16
)

// conversations maps a conversation to the offering that last served it. It is two generations of at most
// maxConversations/2 each: a new conversation goes into the current one, and when that is full the previous is
// dropped and the current becomes the previous. A conversation found in the previous one moves back to the
// current when it is served again.
type conversations struct {
	mu        sync.Mutex
	cur, prev map[string]servedBy
}

type servedBy struct {
	offeringID string
	at         time.Time
}

// lookup returns the offering that served the conversation within ConversationTTL before now, or "".
func (cv *conversations) lookup(key string, now time.Time) string {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	s, ok := cv.cur[key]
	if !ok {
		s, ok = cv.prev[key]
	}
	if !ok || now.Sub(s.at) >= ConversationTTL {
		return ""
	}
	return s.offeringID
}

// served records that the offering served the conversation at now.
func (cv *conversations) served(key, offeringID string, now time.Time) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.cur == nil {
		cv.cur = make(map[string]servedBy)
	}
	if _, ok := cv.cur[key]; !ok && len(cv.cur) >= maxConversations/2 {
		cv.prev, cv.cur = cv.cur, make(map[string]servedBy, len(cv.cur))
	}
	delete(cv.prev, key)
	cv.cur[key] = servedBy{offeringID: offeringID, at: now}
}

// len is how many conversations the record holds.
func (cv *conversations) len() int {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return len(cv.cur) + len(cv.prev)
}

// Served records that the offering answered a request of the conversation (Request.Conversation): its next
// requests go to the offering first while it stays eligible, for ConversationTTL after the last. The gateway
// calls it once an attempt's answer is relayed; an empty conversation is ignored.
func (r *Router) Served(conversation, offeringID string) {
	if conversation == "" || offeringID == "" {
		return
	}
	r.conversations.served(conversation, offeringID, r.cfg.Now())
}
