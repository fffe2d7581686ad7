// Package events is the platform's connection to NATS JetStream, the bus that carries usage events from the
// agents to the meter.
//
// It owns the client connection every role opens (one set of reconnect rules: retry for ever, log each disconnect
// and reconnect) and the readiness probe on that connection. It names everything the platform has on NATS
// (subjects.go): every subject, stream, consumer, bucket, queue group, inbox prefix and account, with the functions
// that build and parse the subjects; no other package spells one. It defines no event types, which belong to the
// packages that publish and consume them; it does own the rigs' credentials and what they permit (rigs.go). The
// embedded nats-server that `make run` and tests use in place of a cluster, with the rigs' users on it, is package
// natsserver (services/events/natsserver), apart so that a client such as the provider's agent does not link the
// server.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// reconnectWait is the pause between attempts to reach a lost server; nats.go adds jitter so that a fleet of
	// agents does not come back in lockstep.
	reconnectWait = time.Second
	// pingTimeout bounds a Ping whose context has no deadline.
	pingTimeout = 2 * time.Second
)

// Connect opens a connection named name (it shows in the server's monitoring) to the NATS server or cluster at
// url, a comma-separated list of nats:// URLs, and returns it with a JetStream client over it.
//
// The first connection must succeed: an unreachable server is an error here, bounded by ctx's deadline when it
// has one. After that the connection never gives up: it reconnects for ever, buffering publishes meanwhile, and
// logs each disconnect and reconnect. The caller closes nc (Drain, to finish in-flight work). extra options come
// last, such as nats.InProcessServer for a server embedded in the caller's process.
func Connect(ctx context.Context, url, name string, log *slog.Logger, extra ...nats.Option) (nc *nats.Conn, js jetstream.JetStream, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("events: connect %q to NATS at %s: %w", name, redactedURLs(url), err)
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.Default()
	}

	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil when the connection is closed on purpose
				log.Warn("NATS connection lost; reconnecting", "name", name, "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS connection restored", "name", name, "server", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("NATS connection closed", "name", name)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("NATS asynchronous error", "name", name, "subject", subject, "error", err)
		}),
	}
	if deadline, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(deadline)))
	}
	opts = append(opts, extra...)

	nc, err = nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, err
	}
	js, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	log.Info("connected to NATS", "name", name, "server", nc.ConnectedUrlRedacted())
	return nc, js, nil
}

// Ping checks that nc is connected and that the server answers within ctx (or two seconds, when ctx has no
// deadline), for a readiness probe. While nc is reconnecting, it fails at once.
func Ping(ctx context.Context, nc *nats.Conn) error {
	if !nc.IsConnected() {
		return fmt.Errorf("events: NATS connection is %s", strings.ToLower(nc.Status().String()))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("events: NATS server did not answer a ping: %w", err)
	}
	return nil
}

// redactedURLs is a server list fit for a log line or an error: passwords and tokens hidden.
func redactedURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
