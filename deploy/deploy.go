// Package deploy holds the files that deploy the platform and the provider's agent. The rig's systemd unit is
// embedded here so that the platform publishes, at /downloads/gpuagent@.service, exactly the file the repository
// tests (cmd/gpuagent's deploy_test.go).
package deploy

import _ "embed"

// AgentUnit is gpuagent@.service, the systemd unit that runs gpuagent on a provider's Linux rig: a template, one
// instance per offering the machine serves (gpuagent@<offering id>), each with its own environment file and outbox.
//
//go:embed gpuagent@.service
var AgentUnit string

// AgentUnitName is the unit's file name, as published and as installed under /etc/systemd/system.
const AgentUnitName = "gpuagent@.service"

// AgentInstance is the unit's instance that serves an offering, as systemctl names it.
func AgentInstance(offeringID string) string { return "gpuagent@" + offeringID }

// AgentEnvPath is where the instance serving an offering reads its environment file.
func AgentEnvPath(offeringID string) string { return "/etc/gpuagent/" + offeringID + ".env" }
