package metering

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"
)

// The meter's feed: after a batch commits, the meter tells every gateway what the batch's stored events measured,
// on core NATS, so that routing holds each rig's own figures of its requests (package routing,
// Router.ObserveUsage), to show beside the gateways' measurements and compare with them; they decide no tier and
// no route. Only committed events go out, each once: an event the database already held (a
// redelivery, a duplicate) is not in the batch's stored events.
//
// The feed is best effort and never holds up metering: a batch's events are encoded and published off the
// committing goroutine, and dropped when NATS is unreachable or the previous batches are still being published.
// Live figures are a sliding window; a lost message makes it thinner for a while, nothing more. Nothing is
// billed from the feed: the usage rows are the record.
//
// A message is JSON (FeedMessage): one committed batch's stored events, or feedChunk of them, grouped by offering
// and each offering's in columns, so that a field's name is written once per offering rather than once per event.
// A 5,000-event batch goes out in five messages of at most about 200 KB (request ids of MaxIDLength bytes), under
// NATS's default maximum payload of 1 MB; a server with a smaller one gets smaller messages.

const (
	// feedChunk is the most events one feed message carries.
	feedChunk = 1000
	// feedInFlight is how many batches may be encoded and published at once; a batch beyond them is dropped.
	feedInFlight = 2
)

// FeedMessage is the body of a message on events.MeteredSubject, the feed's core NATS subject.
type FeedMessage struct {
	Offerings []FeedOffering `json:"offerings"`
}

// FeedOffering is one offering's stored events in a FeedMessage: the i-th element of every column belongs to the
// i-th event.
type FeedOffering struct {
	OfferingID     string         `json:"offering_id"`
	RequestIDs     []string       `json:"request_id"`
	TimesMicro     []int64        `json:"time_us"` // the event's time (when the request ended), Unix microseconds
	TTFTMillis     []float64      `json:"ttft_ms"` // to the microsecond
	DurationMillis []float64      `json:"duration_ms"`
	InputTokens    []int64        `json:"input_tokens"`
	OutputTokens   []int64        `json:"output_tokens"`
	Statuses       []usage.Status `json:"status"`
}

// Metered is a stored event as the feed carries it: of its Usage, the request and offering ids, the times, the
// token counts and the status (no ticket, model or energy); At is the event's time.
type Metered struct {
	Usage usage.Usage
	At    time.Time
}

// EncodeFeed encodes stored events, usages[i] having ended at occurred[i], as feed messages of at most feedChunk
// events each, in the order given.
func EncodeFeed(usages []usage.Usage, occurred []time.Time) ([][]byte, error) {
	return encodeFeed(usages, occurred, feedChunk)
}

func encodeFeed(usages []usage.Usage, occurred []time.Time, chunk int) ([][]byte, error) {
	if len(usages) != len(occurred) {
		return nil, fmt.Errorf("metering: feed of %d events with %d times", len(usages), len(occurred))
	}
	var out [][]byte
	for from := 0; from < len(usages); from += chunk {
		to := min(from+chunk, len(usages))
		b, err := json.Marshal(feedMessage(usages[from:to], occurred[from:to]))
		if err != nil {
			return out, fmt.Errorf("metering: encode feed: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// feedMessage groups events by offering, in the order each offering first appears.
func feedMessage(usages []usage.Usage, occurred []time.Time) FeedMessage {
	var msg FeedMessage
	index := map[string]int{}
	for i := range usages {
		u := &usages[i]
		k, ok := index[u.OfferingID]
		if !ok {
			k = len(msg.Offerings)
			index[u.OfferingID] = k
			msg.Offerings = append(msg.Offerings, FeedOffering{OfferingID: u.OfferingID})
		}
		o := &msg.Offerings[k]
		o.RequestIDs = append(o.RequestIDs, u.RequestID)
		o.TimesMicro = append(o.TimesMicro, occurred[i].UnixMicro())
		o.TTFTMillis = append(o.TTFTMillis, toMicros(u.TTFTMillis))
		o.DurationMillis = append(o.DurationMillis, toMicros(u.DurationMillis))
		o.InputTokens = append(o.InputTokens, u.InputTokens)
		o.OutputTokens = append(o.OutputTokens, u.OutputTokens)
		o.Statuses = append(o.Statuses, u.Status)
	}
	return msg
}

// toMicros rounds milliseconds to the microsecond, which keeps the message short; a time under a microsecond stays
// above 0 (a first token came), and a value that is not finite (the contract refuses one) is 0.
func toMicros(ms float64) float64 {
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return 0
	}
	if ms > 0 && ms < 0.001 {
		return 0.001
	}
	return math.Round(ms*1000) / 1000
}

// DecodeFeed reads a feed message. A message whose columns disagree in length, or that names no offering or an
// unknown status, is refused whole.
func DecodeFeed(data []byte) ([]Metered, error) {
	var msg FeedMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, fmt.Errorf("metering: malformed feed message: %w", err)
	}
	n := 0
	for _, o := range msg.Offerings {
		k := len(o.RequestIDs)
		if len(o.TimesMicro) != k || len(o.TTFTMillis) != k || len(o.DurationMillis) != k || len(o.InputTokens) != k ||
			len(o.OutputTokens) != k || len(o.Statuses) != k {
			return nil, fmt.Errorf("metering: feed message for offering %.200q: columns of different lengths", o.OfferingID)
		}
		if o.OfferingID == "" {
			return nil, errors.New("metering: feed message with events of no offering")
		}
		n += k
	}
	out := make([]Metered, 0, n)
	for _, o := range msg.Offerings {
		for i, id := range o.RequestIDs {
			s := o.Statuses[i]
			if s != usage.StatusOK && s != usage.StatusError && s != usage.StatusCanceled {
				return nil, fmt.Errorf("metering: feed message with status %.50q", s)
			}
			out = append(out, Metered{At: time.UnixMicro(o.TimesMicro[i]).UTC(), Usage: usage.Usage{
				RequestID: id, OfferingID: o.OfferingID, TTFTMillis: o.TTFTMillis[i], DurationMillis: o.DurationMillis[i],
				InputTokens: o.InputTokens[i], OutputTokens: o.OutputTokens[i], Status: s,
			}})
		}
	}
	return out, nil
}

// Feed publishes committed batches' stored events on events.MeteredSubject. Its OnCommit is a MeterConfig.OnCommit.
type Feed struct {
	nc    *nats.Conn
	log   *slog.Logger
	slots chan struct{} // a token per batch being published
	once  sync.Once     // Close takes every slot once
}

// NewFeed returns a feed publishing on nc; log (nil: slog.Default()) gets, at debug level, what was dropped.
func NewFeed(nc *nats.Conn, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.Default()
	}
	return &Feed{nc: nc, log: log, slots: make(chan struct{}, feedInFlight)}
}

// OnCommit publishes the stored events of a committed batch, in the background. It returns at once and never
// fails: when NATS is unreachable, or feedInFlight batches are still being published, the batch is dropped.
func (f *Feed) OnCommit(res BatchResult, _ time.Time) {
	if f == nil || f.nc == nil || len(res.Usages) == 0 {
		return
	}
	if len(res.Usages) != len(res.Occurred) {
		f.log.Debug("meter: feed: a batch's events and times disagree; not published", "events", len(res.Usages),
			"times", len(res.Occurred))
		return
	}
	if !f.nc.IsConnected() {
		f.log.Debug("meter: feed: NATS is not connected; a batch's figures dropped", "events", len(res.Usages))
		return
	}
	select {
	case f.slots <- struct{}{}:
	default:
		f.log.Debug("meter: feed: earlier batches are still being published; a batch's figures dropped", "events", len(res.Usages))
		return
	}
	go func() {
		defer func() { <-f.slots }()
		f.publish(res.Usages, res.Occurred, feedChunk)
	}()
}

// Close waits for the batches being published and drops every batch committed after it. Call it once the meter
// has stopped, before the NATS connection closes; calling it again does nothing.
func (f *Feed) Close() {
	if f == nil {
		return
	}
	// Each publication holds a slot until it is done: holding them all, Close has waited for every one, and
	// OnCommit finds none free.
	f.once.Do(func() {
		for range cap(f.slots) {
			f.slots <- struct{}{}
		}
	})
}

// publish sends the events in messages of at most chunk events, halving the chunk for a server whose maximum
// payload is smaller than a message.
func (f *Feed) publish(usages []usage.Usage, occurred []time.Time, chunk int) {
	msgs, err := encodeFeed(usages, occurred, chunk)
	if err != nil {
		f.log.Debug("meter: feed: a batch's figures could not be encoded", "error", err)
		return
	}
	limit := f.nc.MaxPayload()
	for i, b := range msgs {
		if limit > 0 && int64(len(b)) > limit {
			from := i * chunk
			to := min(from+chunk, len(usages))
			if chunk == 1 {
				f.log.Debug("meter: feed: an event's figures exceed NATS's maximum payload; dropped", "bytes", len(b))
				continue
			}
			f.publish(usages[from:to], occurred[from:to], max(chunk/2, 1))
			continue
		}
		if err := f.nc.Publish(events.MeteredSubject, b); err != nil {
			f.log.Debug("meter: feed: publish failed; the rest of a batch's figures dropped", "error", err)
			return
		}
	}
}
