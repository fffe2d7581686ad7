package simulation

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestCountTokens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"Hello, world!", 4},
		{"GPU4090 x2", 2},
		{"don't", 3},
		{"café naïve", 2},
		{"a+b=c;", 6},
		{"日本", 1},
	} {
		if got := CountTokens(c.text); got != c.want {
			t.Errorf("CountTokens(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}

func TestGeneratedTextCountsOneTokenPerPiece(t *testing.T) {
	t.Parallel()
	g := newTextGen(keyedRand(1, "prompt"))
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		piece := g.next()
		if CountTokens(piece) != 1 {
			t.Fatalf("piece %d %q is %d tokens", i, piece, CountTokens(piece))
		}
		b.WriteString(piece)
		if i%250 == 0 && CountTokens(b.String()) != i {
			t.Fatalf("%d pieces count %d tokens", i, CountTokens(b.String()))
		}
	}
	if s := b.String(); !strings.Contains(s, ". ") || !strings.Contains(s, ", ") || s[0] < 'A' || s[0] > 'Z' {
		t.Errorf("text does not read like sentences: %.120s", s)
	}
}

func TestOutputLengthStaysAroundTheMean(t *testing.T) {
	t.Parallel()
	rng := keyedRand(1, "x")
	var sum float64
	for range 10000 {
		n := outputLength(rng, 200)
		if n < 100 || n > 300 {
			t.Fatalf("length %d outside [100, 300]", n)
		}
		sum += float64(n)
	}
	if mean := sum / 10000; math.Abs(mean-200) > 3 {
		t.Fatalf("mean length %g, want about 200", mean)
	}
}

func TestEmbeddingIsADeterministicUnitVector(t *testing.T) {
	t.Parallel()
	a, b, c := embedding(1, "hello", 64), embedding(1, "hello", 64), embedding(1, "world", 64)
	var norm, dot float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("one text, two vectors")
		}
		norm += float64(a[i]) * float64(a[i])
		dot += float64(a[i]) * float64(c[i])
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("norm %g, want 1", norm)
	}
	if dot > 0.9 {
		t.Errorf("different texts have near-identical vectors (cosine %g)", dot)
	}
}

func TestTokenPiecesSplitATextIntoItsTokens(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`{"city":"example","days":1}`, "  Hello, world! ", "a b\tc", `{"two words":"x y"}`, "café", ""} {
		pieces := tokenPieces(text)
		if len(pieces) != CountTokens(text) {
			t.Errorf("%q: %d pieces, %d tokens", text, len(pieces), CountTokens(text))
		}
		for _, p := range pieces {
			if CountTokens(p) != 1 {
				t.Errorf("%q: piece %q is not one token", text, p)
			}
		}
		if CountTokens(text) > 0 && strings.Join(pieces, "") != text {
			t.Errorf("%q: pieces %q", text, pieces)
		}
	}
}

func TestPlaceholderArgumentsOfOddSchemas(t *testing.T) {
	t.Parallel()
	for schema, want := range map[string]string{
		``:                       `{}`,
		`null`:                   `{}`,
		`"not a schema"`:         `{}`,
		`{"type":"object"}`:      `{}`,
		`{"required":["x","x"]}`: `{"x":null}`,
		`{"properties":{"q":{"type":"string"}},"required":["q","missing"]}`:             `{"q":"example","missing":null}`,
		`{"properties":{"k \"1\"":{"type":["null","integer"]}},"required":["k \"1\""]}`: `{"k \"1\"":1}`,
	} {
		if got := placeholderArguments(json.RawMessage(schema)); got != want {
			t.Errorf("%s: %s, want %s", schema, got, want)
		}
	}
}
