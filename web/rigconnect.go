package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/templates"
)

// The rig's Connect page: how a provider runs gpuagent on the rig's own machine, with the rig's own credential on
// the rigs' entry point (docs/usage-stream.md, "The rigs' entry point"; deploy/install-gpuagent.md).

// operatorPassword stands for a rig password the platform does not know: an external NATS server whose rig
// users its operator keeps.
const operatorPassword = "<rig password from the platform operator>"

// agentCapacity is the requests at once the page proposes; the provider sets what the rig can take.
const agentCapacity = 16

// agentUpstream is where the agent expects the inference server, as deploy/gpuagent.service has it.
const agentUpstream = "http://127.0.0.1:8000"

func (s *Server) rigConnectPage(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, providerAccount(c), c.Param("id"))
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
	return s.render(c, http.StatusOK, templates.RigConnect(templates.RigConnectPage{Page: s.page(c, "Connect your rig"),
		Rig: withRigState(offeringRow(o), o, s.now()), NATSURL: cred.NATSURL, Command: AgentCommand(o, cred), EnvFile: AgentEnvFile(o, cred),
		Reissuable: cred.Reissuable}))
}

// rigCredentialReissueSubmit re-issues the rig's credential and shows its Connect page with the new one.
func (s *Server) rigCredentialReissueSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := s.catalog.Own(ctx, providerAccount(c), c.Param("id"))
	if err != nil {
		return err
	}
	if s.rigs == nil {
		return services.Errorf(services.CodeUnavailable, "Rig credentials are not available on this server.")
	}
	if err := s.rigs.ReissueRigCredential(ctx, providerAccount(c), o.ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/provider/rigs/"+url.PathEscape(o.ID)+"/connect?flash=rig-reissued")
}

// AgentCommand is the shell command that runs gpuagent on the rig's machine for an offering, one option per line:
// the secrets in the environment (gpuagent reads them only there), the rest as flags. The agent forwards to the
// inference server on agentUpstream.
func AgentCommand(o catalog.Offering, cred RigCredential) string {
	return strings.Join([]string{
		"GPUAGENT_OFFERING_KEY=" + cred.OfferingKey + " \\",
		"GPUAGENT_NATS_PASSWORD=" + shownPassword(cred) + " \\",
		"gpuagent -provider " + o.ProviderAccountID + " -offering " + o.ID + " \\",
		"  -gpu " + o.GPU + " -gpus " + strconv.Itoa(o.GPUCount) + " -capacity " + strconv.Itoa(agentCapacity) + " \\",
		"  -upstream " + agentUpstream + " \\",
		"  -nats " + cred.NATSURL + " -nats-user " + cred.NATSUser,
	}, "\n")
}

// AgentEnvFile is /etc/gpuagent/gpuagent.env for the offering, in the form of deploy/gpuagent.env.example, which
// deploy/gpuagent.service reads.
func AgentEnvFile(o catalog.Offering, cred RigCredential) string {
	return strings.Join([]string{
		"GPUAGENT_PROVIDER_ID=" + o.ProviderAccountID,
		"GPUAGENT_OFFERING_ID=" + o.ID,
		"GPUAGENT_OFFERING_KEY=" + cred.OfferingKey,
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
