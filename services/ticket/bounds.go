package ticket

import "math"

// The most a request may be billed for, in tokens: the one computation the meter bills by
// (metering) and admission holds by (admission.Admission), so that what admission holds is never
// less than what the meter may bill (see docs/gateway-integrity.md).

// OutputSlack is how many output tokens beyond the relayed bytes and chunks a request may
// bill: the end-of-sequence token, which produces no text, and the few tokens of a stop
// sequence, which the inference server generates and strips from the text.
const OutputSlack = 8

// RelayBound is the most output tokens relayed output can hold: every token of the tokenizers
// served here (byte-level BPE, or SentencePiece with byte fallback) decodes to at least one
// byte of text, a chunk may carry one token that decodes to none (a special token, or the
// first bytes of a character split across tokens, whose text comes in a later chunk), and
// OutputSlack covers what is generated and never relayed. bytes and chunks are what the
// gateway relayed: a stream's output text and its chunks that carried output, or a whole
// answer's body and no chunks.
func RelayBound(bytes, chunks int64) int64 {
	return satAdd(satAdd(max(bytes, 0), max(chunks, 0)), OutputSlack)
}

// Billable is the most tokens a request may be billed for.
type Billable struct {
	Input, Output int64
}

// BillableOf is the most a request with these ticket bounds may be billed for: its ticket's
// input bound, and its output bound or, once the gateway relayed its answer (relayed), the
// lower of that and RelayBound of what it relayed.
func BillableOf(maxInput, maxOutput int64, relayed bool, bytes, chunks int64) Billable {
	b := Billable{Input: max(maxInput, 0), Output: max(maxOutput, 0)}
	if relayed {
		b.Output = min(b.Output, RelayBound(bytes, chunks))
	}
	return b
}

// satAdd is a+b for non-negative a and b, at most math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
