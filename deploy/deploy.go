// Package deploy holds the files that deploy the platform and the provider's agent. The rig's systemd unit is
// embedded here so that the platform publishes, at /downloads/gpuagent.service, exactly the file the repository
// tests (cmd/gpuagent's deploy_test.go).
package deploy

import _ "embed"

// AgentUnit is gpuagent.service, the systemd unit that runs gpuagent on a provider's Linux rig.
//
//go:embed gpuagent.service
var AgentUnit string

// AgentUnitName is the unit's file name, as published and as installed under /etc/systemd/system.
const AgentUnitName = "gpuagent.service"
