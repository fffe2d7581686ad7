// Package dialect holds the APIs the /v1 gateway serves besides OpenAI's chat completions, by translating them to
// and from chat completions: the Anthropic Messages API (Anthropic) and the OpenAI Responses API (Responses). It
// turns a client's body into a chat completions body, a rig's chat completion (whole or streamed chunk by chunk)
// into the dialect's answer, and the gateway's errors into the dialect's shape; and, for rigs whose engine serves
// a dialect itself, it gives the body such a rig gets and reads the usage of its native answers. It reads and
// writes bytes only: the relay to the client, the request's routing and admission are package gateway's, the
// only package that imports this one. It imports none of the gateway's packages but internal/wire.
package dialect

import (
	"time"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// APIs served by translation.
//
// A dialect is an API the gateway serves by translating it to and from OpenAI's chat completions, which every
// rig's engine serves: the Anthropic Messages API (/v1/messages) and the OpenAI Responses API (/v1/responses).
// The client's body is translated into a chat completions body before anything else reads it, so that the tier,
// the caps, the bounds of the route ticket, routing and admission are those of the chat completion it becomes;
// the rig is called on /v1/chat/completions; its agent reports the usage of a chat completion, and the meter bills
// it as it bills any. Only the answer is the dialect's: a whole answer is read (it is a chat completion of at most
// the gateway's bound on a whole answer), its usage kept, and translated; a stream is translated chunk by chunk as
// it is relayed, the usage chunk the gateway asked for included (the dialects' own events carry usage). An error,
// the gateway's own or a rig's, goes out in the dialect's shape. See docs/gateway.md, "Anthropic Messages and
// OpenAI Responses".
type Dialect interface {
	// ToChat translates the client's request body into a chat completions body. Its errors are the client's: a
	// *wire.Error, answered in the dialect's shape.
	ToChat(body []byte) ([]byte, error)
	// Answer translates a whole chat completion (a 2xx JSON answer) into the dialect's answer.
	Answer(chat []byte, t *Translation) ([]byte, error)
	// Stream returns the translator of one streamed answer.
	Stream(t *Translation) ChunkTranslator
	// ErrorBody renders an error in the dialect's shape.
	ErrorBody(ge *wire.Error) []byte
	// NativeAPI is the name by which agents say their engine serves the dialect natively (native.go).
	NativeAPI() string
}

// Translation is what a dialect knows of the request it answers.
type Translation struct {
	RequestID string // the attempt's, which the answer is named by
	Request   []byte // the client's body, as it came
	Model     string // as the rig is asked for it: without a tier suffix
	Created   time.Time
	// Cost is what the request costs for the usage its answer reported; ok is false when there is none to tell.
	// Nil tells none.
	Cost func(*admission.TokenCount) (money.Pico, bool)
}

// ChunkTranslator translates one chat completion stream into the dialect's events.
type ChunkTranslator interface {
	// Chunk takes the JSON payload of one chunk and returns the frames to send the client, server-sent events
	// each ending in a blank line; nil sends nothing.
	Chunk(payload []byte) ([]byte, error)
	// End returns the frames that end the stream, once the chat stream ended with [DONE].
	End() []byte
	// Fail returns the frame that ends a stream the rig broke off: the dialect's error event, with message.
	Fail(message string) []byte
}
