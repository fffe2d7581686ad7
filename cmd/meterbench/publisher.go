package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/cmd/internal/cpuuse"
	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// publishMode is the first argument with which this program runs as the publisher.
const publishMode = "publish"

// publishAhead is how many publications may wait for the stream's acknowledgement at once;
// the next one waits while that many are outstanding.
const publishAhead = 8192

// ackCounter counts the stream's acknowledgements of the publications, which come back to
// one inbox. It is what jetstream's PublishMsgAsync does, less what the benchmark does not
// need (a future per publication, each acknowledgement decoded): the publisher stands for
// rigs on other machines, and the less of this machine it takes, the more the meter's
// figure is the meter's.
type ackCounter struct {
	inbox  string        // below it, the publication's number
	slots  chan struct{} // a token per publication in flight
	acked  atomic.Int64
	total  int64
	failed atomic.Int64
	first  atomic.Value // the first refusal's text
	done   chan struct{}
	sub    *nats.Subscription
}

func newAckCounter(nc *nats.Conn, total int) (*ackCounter, error) {
	a := &ackCounter{inbox: nats.NewInbox(), slots: make(chan struct{}, publishAhead),
		total: int64(total), done: make(chan struct{})}
	sub, err := nc.Subscribe(events.AnyToken(a.inbox), func(m *nats.Msg) {
		// A stored publication is acknowledged with {"stream":...,"seq":...}; a refused one
		// with {"error":...}.
		if bytes.Contains(m.Data, []byte(`"error"`)) && a.failed.Add(1) == 1 {
			a.first.Store(string(m.Data))
		}
		<-a.slots
		if a.acked.Add(1) == a.total {
			close(a.done)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	a.sub = sub
	return a, nil
}

// acquire waits for room for one more publication in flight.
func (a *ackCounter) acquire(ctx context.Context) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return fmt.Errorf("publisher: no acknowledgement from the stream for a minute (%d of %d)", a.acked.Load(), a.total)
	}
}

// wait waits for every acknowledgement and fails when the stream refused a publication.
func (a *ackCounter) wait(ctx context.Context) error {
	select {
	case <-a.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if n := a.failed.Load(); n > 0 {
		return fmt.Errorf("publisher: the stream refused %d of %d publications, the first with %s", n, a.total, a.first.Load())
	}
	return nil
}

// publishReport is what the publisher tells the parent when it is done.
type publishReport struct {
	First     time.Time     `json:"first"` // the first publication
	Last      time.Time     `json:"last"`  // the last acknowledgement from the stream
	Published int           `json:"published"`
	Bytes     int           `json:"bytes"` // of the events' bodies
	CPU       time.Duration `json:"cpu"`   // the publisher's CPU time from its first publication on
}

// The publisher's protocol on its standard input and output, one line each: the parent sends
// the workload; the publisher prepares the events and answers ready; the parent says go; the
// publisher publishes and answers with its report.
const (
	publisherReady = "ready"
	publisherGo    = "go"
)

// preparedEvent is a signed, encoded event waiting for its time stamp.
type preparedEvent struct {
	subject, id string
	body        []byte
	stampAt     int // offset of the time in body
}

// publish is the publisher process: it reads the workload from in, signs and encodes every
// event first (the rigs' and the gateway's work, not the meter's: it is not timed), then, told
// to go, publishes them all, stamping each with the time it goes out, and reports to out.
func publish(ctx context.Context, stdin io.Reader, out io.Writer) error {
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("publisher: read the workload: %w", err)
	}
	var w workload
	if err := json.Unmarshal(line, &w); err != nil {
		return fmt.Errorf("publisher: read the workload: %w", err)
	}
	start := time.Now()
	prepared, err := prepare(&w, start)
	if err != nil {
		return err
	}
	progress("publisher: %d events signed and encoded in %s", len(prepared), time.Since(start).Round(time.Millisecond))

	nc, _, err := events.Connect(ctx, w.NATSURL, "meterbench-publisher", nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	acks, err := newAckCounter(nc, len(prepared))
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, publisherReady); err != nil {
		return err
	}
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != publisherGo {
		return fmt.Errorf("publisher: waiting for %q: %q, %v", publisherGo, line, err)
	}

	cpu := cpuuse.Self()
	report := publishReport{First: time.Now()}
	stamp := make([]byte, 0, 64)
	for i := range prepared {
		if w.Rate > 0 {
			due := report.First.Add(time.Duration(i) * time.Second / time.Duration(w.Rate))
			if ahead := time.Until(due); ahead > time.Millisecond {
				time.Sleep(ahead)
			}
		}
		ev := &prepared[i]
		// Formatting straight into the body would not do: AppendFormat may use the room
		// beyond what it returns as scratch space.
		stamp = time.Now().UTC().AppendFormat(stamp[:0], stampLayout)
		copy(ev.body[ev.stampAt:], stamp)
		report.Bytes += len(ev.body)
		if err := acks.acquire(ctx); err != nil {
			return err
		}
		msg := &nats.Msg{Subject: ev.subject, Reply: events.Child(acks.inbox, strconv.Itoa(i)), Data: ev.body,
			Header: nats.Header{usage.HeaderMsgID: {ev.id}}}
		if err := nc.PublishMsg(msg); err != nil {
			return fmt.Errorf("publisher: event %d: %w", i, err)
		}
		prepared[i] = preparedEvent{} // let the body go once the client has it
	}
	if err := acks.wait(ctx); err != nil {
		return err
	}
	report.Last, report.CPU = time.Now(), cpuuse.Self()-cpu
	report.Published = len(prepared)
	took := report.Last.Sub(report.First)
	progress("publisher: %d events published and acknowledged by the stream in %s (%.0f/s)",
		report.Published, took.Round(time.Millisecond), float64(report.Published)/took.Seconds())
	return json.NewEncoder(out).Encode(report)
}

// prepare signs each event's route ticket, issued a little before now, and encodes the event
// with a placeholder time to be stamped at publication. Every request asked for a streamed
// answer, as the gateway's records of them say, so every row keeps its time to first token.
func prepare(w *workload, now time.Time) ([]preparedEvent, error) {
	signer, err := ticket.NewSigner(w.TicketKey)
	if err != nil {
		return nil, err
	}
	placeholder := []byte(placeholderTime.Format(stampLayout))
	issued := now.Add(-2 * time.Second)
	prepared := make([]preparedEvent, w.Events)
	for k := range prepared {
		i := w.From + k
		off := w.offering(i)
		u := w.usage(i, "")
		tk, err := signer.Sign(ticket.Claims{RequestID: w.requestID(i), AccountID: w.customer(i), APIKeyID: w.apiKey(i),
			OfferingID: off.ID, Tier: off.Tier, AskInput: off.AskIn, AskOutput: off.AskOut, PriceID: off.PriceID,
			MaxInputTokens: u.InputTokens, MaxOutputTokens: maxOutputTokens, Stream: true, IssuedAt: issued})
		if err != nil {
			return nil, err
		}
		ev := usage.NewEvent(w.eventID(i), off.Provider, off.ID, placeholderTime, w.usage(i, tk))
		body, err := usage.Encode(ev)
		if err != nil {
			return nil, err
		}
		at := bytes.Index(body, placeholder)
		if at < 0 {
			return nil, errors.New("publisher: the encoded event does not hold its time as expected")
		}
		prepared[k] = preparedEvent{subject: events.UsageSubject(off.Provider, off.ID), id: ev.ID, body: body, stampAt: at}
	}
	return prepared, nil
}

// publisher is the publisher process seen from the benchmark.
type publisher struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // what it writes to its standard output, line by line
}

// startPublisher runs this program again in its publish mode, hands it the workload and waits
// until it is ready to publish.
func startPublisher(ctx context.Context, w workload) (*publisher, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	p := &publisher{cmd: exec.CommandContext(ctx, exe, publishMode), lines: make(chan string, 2)}
	p.cmd.Stderr = os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the publisher: %w", err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	if _, err := fmt.Fprintf(p.stdin, "%s\n", in); err != nil {
		return nil, fmt.Errorf("the publisher: %w", err)
	}
	select {
	case line := <-p.lines:
		if line != publisherReady {
			return nil, fmt.Errorf("the publisher: %w", p.cmd.Wait())
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p, nil
}

// start tells the publisher to publish.
func (p *publisher) start() error {
	_, err := fmt.Fprintln(p.stdin, publisherGo)
	return err
}

// wait waits for the publisher to finish and returns its report.
func (p *publisher) wait() (publishReport, error) {
	var r publishReport
	line := <-p.lines
	for range p.lines { // Wait closes the pipe: read it to its end first
	}
	if err := p.cmd.Wait(); err != nil {
		return r, fmt.Errorf("the publisher: %w", err)
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return r, fmt.Errorf("the publisher's report %q: %w", line, err)
	}
	return r, nil
}
