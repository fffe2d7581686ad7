package metering

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/ticket"
)

// The attack: one rig floods the usage stream with 20,000 events whose tickets it forged.
// Every one is counted, against that rig and reason, exactly, and counted once however often
// it is delivered; only the first 20 are kept whole and copied to USAGE_REJECTED; the table of
// messages counted is emptied as the consumer acknowledges them. Another rig's few refusals
// are counted and kept on their own.
func TestRejectionsAreCountedPerRigWithBoundedSamples(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	forger, err := ticket.NewSigner([]byte(strings.Repeat("f", 32)))
	if err != nil {
		t.Fatal(err)
	}
	at := e.now.Add(-time.Minute)
	forged := func(i int, provider, offering string) *nats.Msg {
		req := fmt.Sprintf("forged_%d", i)
		tk, err := forger.Sign(ticket.Claims{RequestID: req, AccountID: e.customer, OfferingID: offering, Tier: "standard",
			PriceID: e.price, MaxInputTokens: 1000, MaxOutputTokens: 1000, IssuedAt: at.Add(-time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		ev := usage.NewEvent(fmt.Sprintf("evt_forged_%d", i), provider, offering, at, usage.Usage{RequestID: req, Ticket: tk,
			OfferingID: offering, Model: "m", InputTokens: 1000, OutputTokens: 1000, DurationMillis: 900,
			EnergySource: usage.EnergyEstimated, Status: usage.StatusOK})
		body, err := usage.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		return usageMsg(events.UsageSubject(provider, offering), ev.ID, body)
	}
	const flood, others = 20_000, 5
	msgs := make([]*nats.Msg, 0, flood+others)
	for i := range flood {
		msgs = append(msgs, forged(i, e.provider, e.offering))
	}
	for i := range others {
		msgs = append(msgs, forged(flood+i, e.other, e.foreign))
	}
	// An honest event among them is billed.
	id, body, _ := e.routed(t, route{in: 100, out: 10, at: at})
	msgs = append(msgs, usageMsg(events.UsageSubject(e.provider, e.offering), id, body))
	// A second consumer that never acknowledges keeps the stream's messages (the stream drops what every consumer
	// has acknowledged), so that the first hundred can be delivered again below, as after a crash.
	if _, err := e.js.CreateOrUpdateConsumer(ctx, events.UsageStream, jetstream.ConsumerConfig{Durable: "keeper",
		AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	e.publishAll(t, msgs)
	e.drain(t)

	counts := func() map[string]int {
		rows, err := e.pool.Query(ctx, `SELECT provider_id || '/' || offering_id || '/' || reason, sum(rejected)::int
			FROM usage_rejection_counts GROUP BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		return out
	}
	flooder, other := e.provider+"/"+e.offering+"/ticket_invalid", e.other+"/"+e.foreign+"/ticket_invalid"
	want := map[string]int{flooder: flood, other: others}
	if got := counts(); len(got) != 2 || got[flooder] != flood || got[other] != others {
		t.Fatalf("counts %v, want %v", got, want)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejections WHERE subject = $1`, events.UsageSubject(e.provider, e.offering)); n != DefaultRejectionSamples {
		t.Errorf("%d of the flood kept whole, want the first %d", n, DefaultRejectionSamples)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejections WHERE subject = $1`, events.UsageSubject(e.other, e.foreign)); n != others {
		t.Errorf("%d of the other rig's refusals kept whole, want all %d", n, others)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != 1 {
		t.Errorf("%d usage rows, want the honest event's", n)
	}
	e.wantBalances(t, charge(100, 10), payable(100, 10))

	// The dead-letter stream holds the samples only.
	rejected, err := e.js.Stream(ctx, events.RejectedStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := rejected.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == DefaultRejectionSamples+others {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("USAGE_REJECTED holds %d messages, want the %d samples", info.State.Msgs, DefaultRejectionSamples+others)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Delivered again (a crash after the commit), the same messages are not counted again.
	usage, err := e.js.Stream(ctx, events.UsageStream)
	if err != nil {
		t.Fatal(err)
	}
	var again []Message
	for seq := uint64(1); seq <= 100; seq++ {
		m, err := usage.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, Message{Seq: m.Sequence, Subject: m.Subject, Data: m.Data, Stored: m.Time})
	}
	res, err := e.meter.ProcessMessages(ctx, again)
	if err != nil || len(res.Rejections) != 100 || len(res.Samples) != 0 {
		t.Fatalf("the redelivery: %d rejections, %d samples, %v; want 100 judged and none kept again", len(res.Rejections), len(res.Samples), err)
	}
	if got := counts(); got[flooder] != flood {
		t.Errorf("after a redelivery the flood counts %d, want %d", got[flooder], flood)
	}

	// Storage stays bounded: once the consumer has acknowledged them, no message is remembered.
	if n := e.count(t, `SELECT count(*) FROM usage_rejections_counted`); n != flood+others {
		t.Errorf("%d messages remembered as counted before the acknowledgement floor is read, want %d", n, flood+others)
	}
	info, err := e.cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.meter.forgetCounted(ctx, info.AckFloor.Stream); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejections_counted`); n != 0 {
		t.Errorf("%d messages still remembered below the acknowledgement floor %d", n, info.AckFloor.Stream)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_rejection_counts`); n != 2 {
		t.Errorf("%d count rows, want one per rig and reason in the hour", n)
	}

	// Finance's report: the counts per rig and reason, and the samples.
	report, err := NewReports(e.pool).Rejections(ctx, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.ByRig) != 2 || report.ByRig[0].ProviderID != e.provider || report.ByRig[0].ProviderName != "Fjord" ||
		report.ByRig[0].Count != flood || report.ByRig[0].Samples != DefaultRejectionSamples ||
		report.ByRig[1].Count != others || report.ByRig[1].Samples != others {
		t.Errorf("per rig %+v", report.ByRig)
	}
	if len(report.ByReason) != 1 || report.ByReason[0] != (ReasonCount{Reason: "ticket_invalid", Count: flood + others}) {
		t.Errorf("per reason %+v", report.ByReason)
	}
	if len(report.Samples) != DefaultRejectionSamples+others {
		t.Errorf("%d samples, want %d", len(report.Samples), DefaultRejectionSamples+others)
	}
}
