package metering

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpumarket/gpumarket/services/ticket"
)

// The checks of a batch that need no database: decoding, the contract, the route ticket, and
// duplicates inside the batch.

// checkedBatch is a batch after the checks that need no database, ready to commit.
type checkedBatch struct {
	acks       []jetstream.Msg // the deliveries to acknowledge once it commits
	seqs       []uint64        // their stream sequences, index for index
	now        time.Time       // the meter's clock when it was last checked: its metering time
	cands      []candidate
	rejections []StoredRejection
	checkTook  time.Duration
	received   time.Time // when its newest delivery came
	err        error     // the deliveries could not be read
}

// candidate is an event that passed the checks that need no database.
type candidate struct {
	msg        Message
	ev         usage.UsageEvent
	claims     ticket.Claims
	providerID string
}

// batchBuilder checks a batch's deliveries as they are gathered.
type batchBuilder struct {
	checkedBatch
	m                      *Meter
	seenEvent, seenRequest map[string]bool
}

func (m *Meter) newBatch() *batchBuilder {
	// Sized for a full batch: grown from empty, the maps would rehash a dozen times a batch
	// and the candidates be copied as often.
	b := &batchBuilder{m: m, seenEvent: make(map[string]bool, m.cfg.BatchSize),
		seenRequest: make(map[string]bool, m.cfg.BatchSize)}
	b.cands = make([]candidate, 0, m.cfg.BatchSize)
	return b
}

// checkBatch reads the deliveries' sequences and checks them.
func (m *Meter) checkBatch(batch []jetstream.Msg) checkedBatch {
	b := m.newBatch()
	b.add(batch)
	return b.checkedBatch
}

// check checks messages already read off the stream.
func (m *Meter) check(msgs []Message) checkedBatch {
	b := m.newBatch()
	b.addMessages(msgs)
	return b.checkedBatch
}

// add reads the deliveries' sequences and stream times, checks them and adds them to the batch.
func (b *batchBuilder) add(deliveries []jetstream.Msg) {
	if len(deliveries) > 0 {
		b.received = time.Now()
	}
	b.acks = append(b.acks, deliveries...)
	msgs := make([]Message, 0, len(deliveries))
	for _, d := range deliveries {
		meta, err := d.Metadata()
		if err != nil {
			b.err = fmt.Errorf("metering: message metadata: %w", err)
			return
		}
		b.seqs = append(b.seqs, meta.Sequence.Stream)
		msgs = append(msgs, Message{Seq: meta.Sequence.Stream, Subject: d.Subject(), Data: d.Data(), Stored: meta.Timestamp})
	}
	b.addMessages(msgs)
}

// checkChunk is the fewest events worth a goroutine of their own when checking a batch.
const checkChunk = 256

// addMessages runs the checks that need no database on every message, spread over the cores
// and at the time they run, then refuses duplicates of events earlier in the batch: the first
// wins.
func (b *batchBuilder) addMessages(msgs []Message) {
	if len(msgs) == 0 || b.err != nil {
		return
	}
	start := time.Now()
	b.now = b.m.cfg.Now()
	verdicts := make([]verdict, len(msgs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(msgs)/checkChunk))
	per := (len(msgs) + workers - 1) / workers
	var wg sync.WaitGroup
	for from := 0; from < len(msgs); from += per {
		wg.Go(func() {
			for i := from; i < min(from+per, len(msgs)); i++ {
				verdicts[i] = b.m.checkOne(msgs[i], b.now)
			}
		})
	}
	wg.Wait()

	for i := range verdicts {
		v := &verdicts[i]
		if v.rejected {
			b.rejections = append(b.rejections, v.rejection)
			continue
		}
		ev := &v.cand.ev
		if b.seenEvent[ev.ID] || b.seenRequest[ev.Data.RequestID] {
			b.rejections = append(b.rejections, rejection(v.cand.msg, ev.ID,
				reject(usage.RejectDuplicate, "event %s or request %s earlier in the same batch", ev.ID, ev.Data.RequestID)))
			continue
		}
		b.seenEvent[ev.ID], b.seenRequest[ev.Data.RequestID] = true, true
		b.cands = append(b.cands, v.cand)
	}
	b.checkTook += time.Since(start)
}

// verdict is what the checks made of one message: a candidate, or a rejection.
type verdict struct {
	cand      candidate
	rejected  bool
	rejection StoredRejection
}

func (m *Meter) checkOne(msg Message, now time.Time) verdict {
	ev, err := usage.Decode(msg.Data)
	if err != nil {
		return verdict{rejected: true, rejection: rejection(msg, "", err)}
	}
	if err := usage.Validate(ev, msg.Subject, now); err != nil {
		return verdict{rejected: true, rejection: rejection(msg, ev.ID, err)}
	}
	claims, err := usage.VerifyTicket(ev, m.cfg.Tickets, now, usage.MaxTicketAge)
	if err != nil {
		return verdict{rejected: true, rejection: rejection(msg, ev.ID, err)}
	}
	if claims.PriceID == 0 {
		// A ticket of a gateway that did not yet fix the price at routing: without it the
		// customer's price and the provider's asks are not known (see docs/metering-integrity.md).
		return verdict{rejected: true, rejection: rejection(msg, ev.ID,
			reject(usage.RejectTicketInvalid, "the ticket names no price version: it fixes no terms to bill by"))}
	}
	if !claims.Stream {
		// A whole answer's first byte comes with its last: what a rig reports as its time to first token is
		// its generation time. The row keeps none (NULL), and routing's feed none either.
		ev.Data.TTFTMillis = 0
	}
	providerID, _, _ := events.ParseUsageSubject(msg.Subject)
	return verdict{cand: candidate{msg: msg, ev: ev, claims: claims, providerID: providerID}}
}

// rejection is the stored form of a check's refusal.
func rejection(msg Message, eventID string, err error) StoredRejection {
	reason := usage.ReasonOf(err)
	if reason == "" {
		reason = usage.RejectMalformed
	}
	return StoredRejection{Message: msg, EventID: eventID, Reason: reason, Detail: err.Error()}
}
