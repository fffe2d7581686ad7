package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

// preflightTimeout bounds each of the preflight's checks: a server that answers at all answers within it.
const preflightTimeout = 10 * time.Second

// Preflight checks, once before the agent serves, the two things a rig cannot work without, and says plainly what
// is wrong with either, in words a provider can act on:
//   - the upstream answers GET /v1/models and lists Config.Model (the offering's listed model);
//   - the platform's NATS is reachable at Config.NATSURL, over TLS where the URL asks for it, and lets the rig in
//     with its credential.
//
// The agent itself retries both for ever once it runs (an inference server restarting, the platform away for a
// while); at start a wrong address, a wrong model or a refused credential is a mistake to fix, not an outage to
// wait out, so cmd/gpuagent exits on it. The error is the message to show.
func Preflight(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if err := checkUpstream(ctx, cfg.Upstream, cfg.Model); err != nil {
		return err
	}
	return checkNATS(cfg)
}

// checkUpstream asks the upstream for its models, as the gateway's customers' requests will name them.
func checkUpstream(ctx context.Context, upstream, model string) error {
	base := strings.TrimRight(upstream, "/")
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return fmt.Errorf("upstream %q is not a URL: %w", upstream, err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}} // the inference server is local to the rig
	res, err := client.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("cannot reach the upstream at %s: connection refused — is your inference server running?", base)
		}
		return fmt.Errorf("cannot reach the upstream at %s: %s — is your inference server running, and is -upstream its address?",
			base, reason(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream %s answered GET /v1/models with %s: -upstream must be the base URL of an "+
			"OpenAI-compatible server (vLLM, llama.cpp's server), without /v1", base, res.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 4<<20)).Decode(&list); err != nil {
		return fmt.Errorf("upstream %s answered GET /v1/models with something other than an OpenAI model list: %v", base, err)
	}
	if model == "" {
		return nil
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID == model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	listed := "none"
	if len(ids) > 0 {
		listed = strings.Join(ids, ", ")
	}
	return fmt.Errorf("upstream %s does not list model %s (it lists: %s): serve the offering's model under that name, "+
		"or list the model your server serves", base, model, listed)
}

// checkNATS connects once, without retrying, as the agent will, and closes the connection.
func checkNATS(cfg Config) error {
	opts := []nats.Option{
		nats.Name("gpuagent/" + cfg.ProviderID + "/" + cfg.OfferingID + "/preflight"),
		nats.CustomInboxPrefix(events.RigInboxPrefix(cfg.ProviderID, cfg.OfferingID)),
		nats.Timeout(preflightTimeout),
		nats.NoReconnect(),
	}
	if cfg.NATSUser != "" {
		opts = append(opts, nats.UserInfo(cfg.NATSUser, cfg.NATSPassword))
	}
	nc, err := nats.Connect(cfg.NATSURL, opts...)
	if err == nil {
		nc.Close()
		return nil
	}
	switch {
	case refusedCredential(err) && cfg.NATSUser == "":
		return fmt.Errorf("the platform's NATS at %s asks for this rig's credentials: set -nats-user and "+
			"GPUAGENT_NATS_PASSWORD as your rig's Connect page shows them", cfg.NATSURL)
	case refusedCredential(err):
		return fmt.Errorf("the platform refused this rig's credentials (user %s): re-issue them on your rig's Connect page",
			cfg.NATSUser)
	case tlsFailure(err):
		return fmt.Errorf("TLS with the platform's NATS at %s failed: %s — the entry point's certificate must be "+
			"valid for its name and signed by an authority this machine trusts", cfg.NATSURL, reason(err))
	default:
		why := reason(err)
		if errors.Is(err, nats.ErrNoServers) {
			why = dialFailure(cfg.NATSURL, why)
		}
		return fmt.Errorf("cannot reach the platform's NATS at %s: %s — it must be reachable from this machine "+
			"(outbound TCP to %s)", cfg.NATSURL, why, strings.Join(natsHostPorts(cfg.NATSURL), ", "))
	}
}

// dialFailure is why a TCP connection to the first of the URLs' servers fails ("connection refused", "no such
// host", "i/o timeout"): nats.go says only that no server was available. It is fallback when every one connects.
func dialFailure(urls, fallback string) string {
	for _, hostPort := range natsHostPorts(urls) {
		conn, err := net.DialTimeout("tcp", hostPort, preflightTimeout)
		if err != nil {
			return reason(err)
		}
		conn.Close()
	}
	return fallback
}

func refusedCredential(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

func tlsFailure(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		alert            tls.AlertError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verification) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		strings.Contains(err.Error(), "tls:")
}

// reason is an error's last part, where the operation around it is already named: "connection refused" rather
// than "dial tcp 127.0.0.1:4222: connect: connection refused".
func reason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *net.DNSError
		if errors.As(op.Err, &sys) {
			return sys.Error()
		}
		return strings.TrimPrefix(op.Err.Error(), "connect: ")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return reason(ue.Err)
	}
	return err.Error()
}

// natsHostPorts are the host:port pairs of comma-separated NATS URLs.
func natsHostPorts(urls string) []string {
	var out []string
	for _, part := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(part)); err == nil && u.Host != "" {
			out = append(out, u.Host)
		}
	}
	return out
}
