package metering

import (
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/ticket"
)

func TestBillableTokens(t *testing.T) {
	waits := recordWaits{settle: time.Second, max: 2 * time.Minute}
	ok := func(bytes, chunks int64) *gatewayRecord {
		return &gatewayRecord{httpStatus: 200, status: requestlog.GatewayOK, relayedBytes: bytes, relayedChunks: chunks, counted: true}
	}
	ended := func(code int, status requestlog.GatewayStatus, bytes, chunks int64) *gatewayRecord {
		return &gatewayRecord{httpStatus: code, status: status, relayedBytes: bytes, relayedChunks: chunks, counted: true}
	}
	generation := ticket.Claims{MaxInputTokens: 50, MaxOutputTokens: 1}
	roomy := ticket.Claims{MaxInputTokens: 100_000, MaxOutputTokens: 4096}
	embedding := ticket.Claims{Kind: ticket.KindEmbedding, MaxInputTokens: 8192}
	cases := []struct {
		name    string
		u       usage.Usage
		c       ticket.Claims
		rec     *gatewayRecord
		age     time.Duration
		in, out int64
		flag    Flag
		wait    time.Duration
	}{
		{"a max_tokens 1 request reported as ten million tokens each way is billed its bounds",
			usage.Usage{InputTokens: 10_000_000, OutputTokens: 10_000_000}, generation, ok(3, 1), 0, 50, 1, FlagClipped, 0},
		{"within the bounds and what was relayed: billed as reported",
			usage.Usage{InputTokens: 40, OutputTokens: 1}, generation, ok(3, 1), 0, 40, 1, "", 0},
		{"output beyond what was relayed: bytes + chunks + slack",
			usage.Usage{InputTokens: 900, OutputTokens: 4000}, roomy, ok(100, 20), 0, 900, 100 + 20 + outputSlack, FlagClipped, 0},
		{"a non-streamed response: its body's bytes bound the output",
			usage.Usage{InputTokens: 900, OutputTokens: 4000}, roomy, ok(700, 0), 0, 900, 700 + outputSlack, FlagClipped, 0},
		{"a gateway that did not count what it relayed: the ticket's bound only",
			usage.Usage{InputTokens: 900, OutputTokens: 5000}, roomy, &gatewayRecord{httpStatus: 200, status: requestlog.GatewayOK}, 0, 900, 4096, FlagClipped, 0},
		{"failed over on a 503: nothing, whatever the rig reports",
			usage.Usage{InputTokens: 1000, OutputTokens: 500}, roomy, &gatewayRecord{httpStatus: 503, status: requestlog.GatewayFailedOver}, 0, 0, 0, FlagFailedAttempt, 0},
		{"a 400 relayed as an error: nothing",
			usage.Usage{InputTokens: 1000, OutputTokens: 500}, roomy, &gatewayRecord{httpStatus: 400, status: requestlog.GatewayError}, 0, 0, 0, FlagFailedAttempt, 0},
		{"the client left before the rig answered (499): nothing",
			usage.Usage{InputTokens: 1000, OutputTokens: 500}, roomy, &gatewayRecord{httpStatus: 499, status: requestlog.GatewayCanceled}, 0, 0, 0, FlagFailedAttempt, 0},
		{"canceled after a 200: billed within the bounds, flagged",
			usage.Usage{InputTokens: 200, OutputTokens: 80}, roomy, ended(200, requestlog.GatewayCanceled, 400, 80),
			0, 200, 80, FlagIncomplete, 0},
		{"broken off after a 200 and inflated: clipped, flagged incomplete",
			usage.Usage{InputTokens: 200, OutputTokens: 900}, roomy, ended(200, requestlog.GatewayError, 40, 10),
			0, 200, 40 + 10 + outputSlack, FlagIncomplete, 0},
		{"an embedding is billed its input only",
			usage.Usage{InputTokens: 9000, OutputTokens: 12}, embedding, ok(5000, 0), 0, 8192, 0, FlagClipped, 0},
		{"no record yet, just arrived: wait until the settle time",
			usage.Usage{InputTokens: 10, OutputTokens: 10}, roomy, nil, 300 * time.Millisecond, 0, 0, "", 700 * time.Millisecond},
		{"no record after the settle time: look again later",
			usage.Usage{InputTokens: 10, OutputTokens: 10}, roomy, nil, 10 * time.Second, 0, 0, "", 5 * time.Second},
		{"no record after the longest wait: billed within the ticket's bounds, flagged",
			usage.Usage{InputTokens: 10_000_000, OutputTokens: 10_000_000}, generation, nil, 2 * time.Minute, 50, 1, FlagNoGatewayRecord, 0},
	}
	for _, c := range cases {
		got := billableTokens(c.u, c.c, c.rec, c.age, waits)
		if got.in != c.in || got.out != c.out || got.flag != c.flag || got.wait != c.wait {
			t.Errorf("%s: billed %d in, %d out, flag %q, wait %s; want %d, %d, %q, %s (%s)",
				c.name, got.in, got.out, got.flag, got.wait, c.in, c.out, c.flag, c.wait, got.detail)
		}
		if (got.flag != "") != (got.detail != "") {
			t.Errorf("%s: flag %q with reason %q", c.name, got.flag, got.detail)
		}
	}
}

// An event waiting for its record is looked at again after the settle time, then less and
// less often, and billed without one at the longest wait: never spinning, never past it.
func TestDeferDelay(t *testing.T) {
	w := recordWaits{settle: time.Second, max: 2 * time.Minute}
	cases := []struct{ age, want time.Duration }{
		{-time.Hour, time.Second}, // a meter clock behind the stream's: the settle time, no more
		{0, time.Second},
		{990 * time.Millisecond, minDeferral},
		{time.Second, time.Second},
		{30 * time.Second, 15 * time.Second},
		{110 * time.Second, 10 * time.Second},
		{2*time.Minute - time.Millisecond, minDeferral},
	}
	for _, c := range cases {
		if got := deferDelay(c.age, w); got != c.want {
			t.Errorf("deferDelay(%s) = %s, want %s", c.age, got, c.want)
		}
	}
	looks, age := 0, time.Duration(0)
	for age < w.max {
		age += deferDelay(age, w)
		looks++
	}
	if looks > 16 || age > w.max+minDeferral {
		t.Errorf("an event without a record is looked at %d times and billed at %s, want about a dozen and at %s", looks, age, w.max)
	}
}
