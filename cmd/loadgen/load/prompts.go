package load

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// distinctPrompts is how many different synthetic prompts a run sends, in turn: enough that a
// server's prefix cache does not answer most of them, few enough that bodies stay small in memory.
const distinctPrompts = 256

// words make the synthetic prompts: common English words that are one token each in the usual
// BPE vocabularies, and one token each by the simulation's rule.
var words = strings.Fields(`the of and to in is was for on that with as by at from his her an be this
have are it not but or which had one all were they their there been has will more if can who would
when what out so up about into than them some only other time new these two may first then do any
like my now over such our man me even most made after also did many before must through back years
where much your way well down should because each just those people how too little state good very
make world still own see men work long get here between both life being under never day same another
know while last might us great old year off come since against go came right used take three`)

// syntheticPrompt is prompt i of a seed: a request to summarize followed by words drawn from the
// list, about tokens tokens long in all.
func syntheticPrompt(seed uint64, i, tokens int) string {
	const lead = "Summarize these notes:"
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	var b strings.Builder
	b.WriteString(lead)
	for range tokens - 4 { // the lead is four tokens
		b.WriteByte(' ')
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

type chatBody struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	GPUMarket     *pinOptions    `json:"gpumarket,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type completionBody struct {
	Model         string         `json:"model"`
	Prompt        string         `json:"prompt"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	GPUMarket     *pinOptions    `json:"gpumarket,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// pinOptions is the gateway's body object "gpumarket" that pins a request to one offering: the gateway
// sends it there or nowhere, without failover.
type pinOptions struct {
	Offering string `json:"offering"`
}

// requestBodies encodes the run's requests before it starts: one body per given prompt, or up
// to distinctPrompts synthetic ones, each pinned to the offering when one is named. Request i
// sends body i modulo their number.
func requestBodies(o Options) ([][]byte, error) {
	prompts := o.Prompts
	if len(prompts) == 0 {
		prompts = make([]string, min(o.Requests, distinctPrompts))
		for i := range prompts {
			prompts[i] = syntheticPrompt(o.Seed, i, o.PromptTokens)
		}
	}
	var so *streamOptions
	if o.Stream {
		so = &streamOptions{IncludeUsage: true}
	}
	var pin *pinOptions
	if o.Offering != "" {
		pin = &pinOptions{Offering: o.Offering}
	}
	bodies := make([][]byte, len(prompts))
	for i, p := range prompts {
		var v any = chatBody{Model: o.Model, Messages: []chatMessage{{Role: "user", Content: p}},
			MaxTokens: o.MaxTokens, Stream: o.Stream, StreamOptions: so, GPUMarket: pin}
		if o.Endpoint == EndpointCompletions {
			v = completionBody{Model: o.Model, Prompt: p, MaxTokens: o.MaxTokens, Stream: o.Stream, StreamOptions: so, GPUMarket: pin}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("load: encode request %d: %w", i, err)
		}
		bodies[i] = b
	}
	return bodies, nil
}
