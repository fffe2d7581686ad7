package simulation

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"unicode"
)

// CountTokens counts the tokens of a text by the simulation's rule: a maximal run of letters and
// digits is one token, and so is every other rune that is not white space. "Hello, world!" is
// four tokens. Real tokenizers differ; what matters here is that the rule is simple, stable and
// applied alike to prompts and to the text the server generates.
func CountTokens(s string) int {
	n, inWord := 0, false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if !inWord {
				n++
			}
			inWord = true
		case unicode.IsSpace(r):
			inWord = false
		default:
			n++
			inWord = false
		}
	}
	return n
}

// keyedRand is a random source determined by the server's seed and a text, so that the same
// prompt draws the same output whenever and wherever it is served.
func keyedRand(seed uint64, key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(key))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// outputLength is the length of an answer without a token limit: uniform between half and one
// and a half times the mean, at least one token.
func outputLength(rng *rand.Rand, mean float64) int {
	return max(1, int(math.Round(mean*(0.5+rng.Float64()))))
}

var vocabulary = strings.Fields(`the a of to and in is that for it as with on was be by this are
from at or an not have which but can more one all their has will been its also other into some
model token request latency throughput GPU cluster memory batch queue prompt answer inference
price tier offering provider rig cost energy carbon time first output per second network node
card cache kernel tensor layer weight attention context window stream server client gateway
meter ledger credit usage event measured estimated fast slow cheap efficient consumer enterprise
hybrid fleet load rate percentile median tail budget market idle local remote simple stable`)

// textGen generates an answer one token at a time: words of a fixed vocabulary, with a comma
// or a full stop now and then. Every piece it returns is exactly one token by CountTokens, so
// the text of n pieces counts n tokens.
type textGen struct {
	rng      *rand.Rand
	pieces   int
	sentence bool // the next word starts a sentence
}

func newTextGen(rng *rand.Rand) *textGen { return &textGen{rng: rng, sentence: true} }

// next returns the next token with the space that precedes it.
func (g *textGen) next() string {
	g.pieces++
	if g.pieces > 1 && !g.sentence {
		switch x := g.rng.IntN(100); {
		case x < 8:
			g.sentence = true
			return "."
		case x < 14:
			return ","
		}
	}
	w := vocabulary[g.rng.IntN(len(vocabulary))]
	if g.sentence {
		w = strings.ToUpper(w[:1]) + w[1:]
		g.sentence = false
	}
	if g.pieces == 1 {
		return w
	}
	return " " + w
}

// embedding is a deterministic unit vector of dims components for a text.
func embedding(seed uint64, text string, dims int) []float32 {
	rng := keyedRand(seed, "embedding\x00"+text)
	v := make([]float64, dims)
	var norm float64
	for i := range v {
		v[i] = rng.NormFloat64()
		norm += v[i] * v[i]
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	for i := range v {
		out[i] = float32(v[i] / norm)
	}
	return out
}
