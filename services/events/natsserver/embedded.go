// Package natsserver is the NATS server the platform embeds: the nats-server with JetStream that `make run` and
// tests use in place of a cluster (same protocol, JetStream on disk), and the rigs' entry point on it: the rigs'
// account, the platform's and the system account's users and the auth callout (RigEntry), and optionally wss://. It
// is kept apart from package events so that a client, the provider's agent among them, connects to NATS without
// linking the server.
//
// The permissions a rig gets here are the ones package events describes for rig credentials (events.RigPermissions),
// and what the rigs' account shares with the platform's is events.SharedWithRigs: package events names every
// subject.
package natsserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long StartEmbedded waits for the server to accept clients.
const readyTimeout = 10 * time.Second

// EmbeddedOptions configures the in-process NATS server.
type EmbeddedOptions struct {
	// Host is the address to listen on; "" means 127.0.0.1. Agents on other machines need 0.0.0.0 or a public
	// address.
	Host string
	// Port is the client port; 0 picks a free one. When it is taken, a free one is used instead and a warning
	// says so.
	Port int
	// StoreDir is the directory JetStream keeps its streams in. Required: a stream must survive a restart.
	StoreDir string
	// Users, when set, are the only clients let in, with the permissions given to each, all in the platform's
	// account; nil (and no Rigs) lets any client in. Tests put rigs' users (RigUser) and the platform's own
	// (PlatformUser) here.
	Users []*server.User
	// Rigs, when set, lets rigs in as the platform does everywhere: the platform's own users, and the auth callout
	// for every other name, answered by the platform (package rigauth) with a user in the rigs' account.
	Rigs *RigEntry
	// RigsTLS, when set, is an entry point for rigs with TLS beside the client port: NATS over WebSocket (wss://),
	// as the cluster's (deploy/nats/nats.conf).
	RigsTLS *TLSEntry
	// Authenticator, when set, decides who may connect and with what permissions, in place of Users and Rigs'
	// users (a test's own rule).
	Authenticator server.Authentication
	// Log receives the server's log; nil means slog.Default().
	Log *slog.Logger
}

// TLSEntry is where the embedded server takes rigs over wss://, and its certificate.
type TLSEntry struct {
	// Host and Port are where it listens; "" is every address.
	Host string
	Port int
	// CertFile and KeyFile are the certificate chain and its key, PEM.
	CertFile, KeyFile string
}

// StartEmbedded starts a NATS server with JetStream inside this process and waits until it accepts clients.
// Clients connect to s.ClientURL(); the caller stops it with s.Shutdown() and s.WaitForShutdown().
func StartEmbedded(opts EmbeddedOptions) (s *server.Server, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("natsserver: start embedded NATS: %w", err)
		}
	}()
	if opts.StoreDir == "" {
		return nil, errors.New("no StoreDir for JetStream")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}

	port, fallback := opts.Port, false
	switch {
	case port == 0:
		port = server.RANDOM_PORT // for nats-server, port 0 means its default, 4222
	case !canListen(opts.Host, port):
		port, fallback = server.RANDOM_PORT, true
	}

	so := &server.Options{
		ServerName: "gpumarket-embedded",
		Host:       opts.Host,
		Port:       port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		Users:      opts.Users,

		CustomClientAuthentication: opts.Authenticator,
		NoSigs:                     true, // signals belong to the process that embeds the server
	}
	if opts.Rigs != nil {
		opts.Rigs.configure(so)
	}
	if e := opts.RigsTLS; e != nil {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: e.CertFile, KeyFile: e.KeyFile})
		if err != nil {
			return nil, fmt.Errorf("the rigs' TLS entry point: %w", err)
		}
		so.Websocket = server.WebsocketOpts{Host: e.Host, Port: e.Port, TLSConfig: tc}
	}
	s, err = server.NewServer(so)
	if err != nil {
		return nil, err
	}
	logger := &serverLog{log: log}
	s.SetLoggerV2(logger, log.Enabled(context.Background(), slog.LevelDebug), false, false)
	s.Start()
	// Wait in short steps: when nats-server cannot listen or start JetStream, it logs a fatal error and will
	// never be ready.
	for deadline := time.Now().Add(readyTimeout); !s.ReadyForConnections(100 * time.Millisecond); {
		if fatal := logger.lastFatal(); fatal != "" {
			s.Shutdown()
			return nil, errors.New(fatal)
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("not ready for clients on %s within %s", opts.Host, readyTimeout)
		}
	}

	if _, err := openRigsAccount(s); err != nil {
		s.Shutdown()
		return nil, err
	}

	addr := s.Addr().(*net.TCPAddr)
	if fallback {
		log.Warn(fmt.Sprintf("port %d is taken; embedded NATS listens on %s instead",
			opts.Port, net.JoinHostPort(opts.Host, strconv.Itoa(addr.Port))))
	}
	log.Info("embedded NATS ready", "url", s.ClientURL(), "jetstream_store", opts.StoreDir)
	return s, nil
}

// canListen reports whether a listener can open on host:port now.
func canListen(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// serverLog passes nats-server's log to slog. Its notices go to debug: its startup banner is a dozen lines, and
// StartEmbedded says in one line that the server is ready. It keeps the last fatal message, which nats-server
// logs instead of returning when it cannot listen or start JetStream.
type serverLog struct {
	log   *slog.Logger
	mu    sync.Mutex
	fatal string
}

var _ server.Logger = (*serverLog)(nil)

func (l *serverLog) Noticef(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "from", "nats")
}

func (l *serverLog) Warnf(format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...), "from", "nats")
}

func (l *serverLog) Errorf(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...), "from", "nats")
}

func (l *serverLog) Debugf(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "from", "nats")
}

func (l *serverLog) Tracef(format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...), "from", "nats")
}

func (l *serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	l.fatal = msg
	l.mu.Unlock()
	l.log.Error(msg, "from", "nats")
}

func (l *serverLog) lastFatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

// EmbeddedGCPercent is the garbage collector's growth target (GOGC) for a process that holds
// the embedded server, unless GOGC says otherwise. The server keeps the id of every usage
// event of the stream's deduplication window on the heap, a million ids at full load, and
// Go's default of 100 collects every time the heap grows by its live size, marking all those
// ids each time: the more ids, the more of the process's CPU goes to marking them (a tenth of
// it with 300,000 ids in the window). At 400 the heap peaks at five times what is live
// instead of twice, and collections come four times less often.
const EmbeddedGCPercent = 400

// TuneGCForEmbedded sets EmbeddedGCPercent unless gogcSet says the GOGC environment variable is
// set (the runtime then follows it), and returns the growth target in force. The binary reads
// its environment; this package only takes the answer.
func TuneGCForEmbedded(gogcSet bool) int {
	if gogcSet {
		in := debug.SetGCPercent(100) // reading the target means setting one: set it back
		debug.SetGCPercent(in)
		return in
	}
	debug.SetGCPercent(EmbeddedGCPercent)
	return EmbeddedGCPercent
}
