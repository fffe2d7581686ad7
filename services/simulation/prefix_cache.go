package simulation

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// The simulated prefix cache: a stand-in for vLLM's automatic prefix caching, so that usage
// reports cached prompt tokens (usage.prompt_tokens_details.cached_tokens) as a real engine
// does, and the platform's pricing of them can be seen end to end.
//
// A prompt is cut where its messages end (a chat) or taken whole (a completion). Serving it
// remembers every such prefix; a later prompt that starts with a remembered prefix reports the
// tokens of the longest one as cached, in whole blocks of prefixBlockTokens (vLLM caches whole
// blocks of 16 tokens) and never the prompt's last token (vLLM always computes it again). So
// the second request of a conversation, which repeats the first one's messages, reports them
// cached; the first reports none. The cache is deterministic: it depends only on the prompts
// served and their order. It holds at most maxCachedPrefixes prefixes and forgets the oldest
// first, as a full KV cache evicts.
const (
	prefixBlockTokens = 16
	maxCachedPrefixes = 4096
)

// prefixCache remembers prompt prefixes served, by a hash of the model and the prefix.
type prefixCache struct {
	mu    sync.Mutex
	seen  map[[sha256.Size]byte]bool
	order [][sha256.Size]byte // oldest first, for eviction
}

// promptPart is a piece of a prompt that a prefix may end after: a chat message, or a whole
// completion prompt, with its tokens.
type promptPart struct {
	text   string
	tokens int
}

// serve reports how many of the prompt's tokens were cached, and remembers its prefixes.
func (c *prefixCache) serve(model string, parts []promptPart) (cached int) {
	keys := make([][sha256.Size]byte, len(parts))
	ends := make([]int, len(parts)) // tokens up to the end of each part
	h := sha256.New()
	h.Write([]byte(model))
	total := 0
	for i, p := range parts {
		// Each part is written after its length, so that no two cuts of a prompt hash alike.
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p.text))))
		h.Write([]byte(p.text))
		copy(keys[i][:], h.Sum(nil))
		total += p.tokens
		ends[i] = total
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = make(map[[sha256.Size]byte]bool)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if c.seen[keys[i]] {
			cached = ends[i]
			break
		}
	}
	for _, k := range keys {
		if c.seen[k] {
			continue
		}
		if len(c.order) >= maxCachedPrefixes {
			delete(c.seen, c.order[0])
			c.order = c.order[1:]
		}
		c.seen[k] = true
		c.order = append(c.order, k)
	}
	cached = min(cached, total-1)
	return max(cached/prefixBlockTokens*prefixBlockTokens, 0)
}
