package provider

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/deploy"
	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/downloads"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The rig's Connect page: how a provider downloads and runs gpuagent on the rig's own machine, with the rig's own
// credential on the rigs' entry point (docs/agent-distribution.md; docs/usage-stream.md, "The rigs' entry point";
// deploy/install-gpuagent.md).

// operatorPassword stands for a rig password the platform does not know: an external NATS server whose rig
// users its operator keeps.
const operatorPassword = "<rig password from the platform operator>"

// agentCapacity is the requests at once the page proposes; the provider sets what the rig can take.
const agentCapacity = 16

// agentUpstream is where the page proposes the inference server, as the agent's default has it.
const agentUpstream = "http://127.0.0.1:8000"

func (s *Server) rigConnectPage(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	if s.rigs == nil {
		return services.Errorf(services.CodeUnavailable, "Rig credentials are not available on this server.")
	}
	cred, err := s.rigs.RigCredentials(ctx, o.ID)
	if err != nil {
		return err
	}
	base := s.BaseURL(c)
	page := templates.RigConnectPage{Page: s.Page(c, "Connect your rig"), Rig: core.WithRigState(core.OfferingRow(o), o, s.Now()),
		NATSURL: cred.NATSURL, NATSLoopback: loopbackURL(cred.NATSURL),
		DownloadBase: base, DownloadLoopback: loopbackURL(base),
		EnvFile: AgentEnvFile(o, cred), EnvPath: deploy.AgentEnvPath(o.ID), ServiceName: deploy.AgentInstance(o.ID),
		ServiceCommand: AgentServiceCommand(o, base+"/downloads/"+deploy.AgentUnitName),
		UnitURL:        base + "/downloads/" + deploy.AgentUnitName, UnitName: deploy.AgentUnitName, Unit: deploy.AgentUnit,
		Reissuable: cred.Reissuable}
	for _, arch := range downloads.Arches {
		dl := AgentDownload{Arch: arch}
		if s.downloads != nil {
			bin, err := s.downloads.Agent(arch)
			switch {
			case err == nil:
				dl.URL, dl.SHA256 = base+"/downloads/"+bin.Name, bin.SHA256
			case !errors.Is(err, downloads.ErrNotPublished):
				return err
			}
		}
		page.Agents = append(page.Agents, templates.AgentDownload{Arch: arch, Machine: unameMachine[arch],
			Available: dl.URL != "", Command: AgentCommand(o, cred, dl)})
	}
	return s.Render(c, http.StatusOK, templates.RigConnect(page))
}

// unameMachine is what `uname -m` says on each architecture the agent is published for.
var unameMachine = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// rigCredentialReissueSubmit re-issues the rig's credential and shows its Connect page with the new one.
func (s *Server) rigCredentialReissueSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, core.ProviderAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	if s.rigs == nil {
		return services.Errorf(services.CodeUnavailable, "Rig credentials are not available on this server.")
	}
	if err := s.rigs.ReissueRigCredential(ctx, core.ProviderAccount(c), o.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+url.PathEscape(o.ID)+"/connect?flash=rig-reissued")
}

// AgentDownload is where a rig downloads gpuagent for one architecture, and the SHA-256 the file must have; URL is
// empty when this server does not publish it.
type AgentDownload struct {
	Arch   string // as GOARCH names it: amd64, arm64
	URL    string
	SHA256 string
}

// AgentCommand is the one shell command that downloads gpuagent, checks its SHA-256 and runs it for an offering,
// for a plain POSIX shell with curl and sha256sum: every step runs only when the one before it succeeded, so a
// file that is not the published one is never run. The secrets go in the environment (gpuagent reads them only
// there), the rest as flags, one group a line. Without a download (this server publishes none for the
// architecture), it is the run alone, of a gpuagent built by hand in the current directory.
func AgentCommand(o catalog.Offering, cred RigCredential, dl AgentDownload) string {
	run := []string{
		"GPUAGENT_OFFERING_KEY=" + shellWord(cred.OfferingKey) + " GPUAGENT_NATS_PASSWORD=" + shellWord(shownPassword(cred)) + " \\",
		"./gpuagent -provider " + shellWord(o.ProviderAccountID) + " -offering " + shellWord(o.ID) + " -model " + shellWord(o.Model) + " \\",
		"  -gpu " + shellWord(o.GPU) + " -gpus " + strconv.Itoa(o.GPUCount) + " -capacity " + strconv.Itoa(agentCapacity) +
			" -upstream " + agentUpstream + " \\",
		"  -nats " + shellWord(cred.NATSURL) + " -nats-user " + shellWord(cred.NATSUser),
	}
	if dl.URL == "" {
		return strings.Join(run, "\n")
	}
	fetch := []string{
		"curl -fsSLo gpuagent " + shellWord(dl.URL) + " &&",
		"echo " + shellWord(dl.SHA256+"  gpuagent") + " | sha256sum -c - &&",
		"chmod +x gpuagent &&",
	}
	return strings.Join(append(fetch, run...), "\n")
}

// AgentServiceCommand installs the downloaded agent and the systemd unit deploy/gpuagent@.service from unitURL, and
// starts the unit's instance for the offering, which reads the environment file at deploy.AgentEnvPath: each
// offering served from one machine has an instance, an environment file and an outbox of its own.
func AgentServiceCommand(o catalog.Offering, unitURL string) string {
	instance := shellWord(deploy.AgentInstance(o.ID))
	return strings.Join([]string{
		"sudo install -m 0755 gpuagent /usr/local/bin/gpuagent",
		"sudo install -d -m 0700 /etc/gpuagent",
		"sudoedit " + shellWord(deploy.AgentEnvPath(o.ID)) + "    # paste the environment file below",
		"sudo curl -fsSLo " + shellWord("/etc/systemd/system/"+deploy.AgentUnitName) + " " + shellWord(unitURL),
		"sudo systemctl daemon-reload && sudo systemctl enable --now " + instance,
		"journalctl -u " + instance + " -f",
	}, "\n")
}

// AgentEnvFile is the environment file of the offering's instance of deploy/gpuagent@.service
// (deploy.AgentEnvPath), in the form of deploy/gpuagent.env.example.
func AgentEnvFile(o catalog.Offering, cred RigCredential) string {
	return strings.Join([]string{
		"GPUAGENT_PROVIDER_ID=" + o.ProviderAccountID,
		"GPUAGENT_OFFERING_ID=" + o.ID,
		"GPUAGENT_OFFERING_KEY=" + cred.OfferingKey,
		"GPUAGENT_MODEL=" + o.Model,
		"GPUAGENT_UPSTREAM=" + agentUpstream,
		"NATS_URL=" + cred.NATSURL,
		"GPUAGENT_NATS_USER=" + cred.NATSUser,
		"GPUAGENT_NATS_PASSWORD=" + shownPassword(cred),
		"GPUAGENT_GPU=" + o.GPU,
		"GPUAGENT_GPU_COUNT=" + strconv.Itoa(o.GPUCount),
		"GPUAGENT_CAPACITY=" + strconv.Itoa(agentCapacity),
	}, "\n") + "\n"
}

func shownPassword(cred RigCredential) string {
	if cred.NATSPassword == "" {
		return operatorPassword
	}
	return cred.NATSPassword
}

// shellWord is s as one word of a POSIX shell command: as it is when it holds only characters the shell takes
// literally, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:,@%+=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// loopbackURL says whether any of the comma-separated URLs names a loopback host (127.0.0.0/8, ::1, localhost),
// which no machine but this server reaches.
func loopbackURL(urls string) bool {
	for _, part := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return true
		}
		if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
			return true
		}
	}
	return false
}

// RigCredentials derives a rig's secrets from the platform's keys: never one of the platform's own
// (docs/usage-stream.md, "The rigs' entry point").
type RigCredentials interface {
	// RigCredentials returns where the rig's agent connects and with what.
	RigCredentials(ctx context.Context, offeringID string) (RigCredential, error)
	// ReissueRigCredential ends the credential the provider's rig holds, closing the rig's connections, and
	// issues the next; a CodeUnavailable error when the platform does not run the rigs' entry point.
	ReissueRigCredential(ctx context.Context, providerAccountID, offeringID string) error
}

// RigCredential is what one rig's agent needs to reach the platform, as its Connect page shows it.
type RigCredential struct {
	NATSURL      string // the rigs' entry point, without credentials
	NATSUser     string // events.RigUsername
	NATSPassword string // empty when the operator of an external NATS server gives it
	OfferingKey  string // verifies the offering's route tickets, hexadecimal
	// Reissuable says the platform runs the rigs' entry point itself and can re-issue the credential.
	Reissuable bool
}
