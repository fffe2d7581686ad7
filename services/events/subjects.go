package events

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// The platform's NATS names, every one of them: subjects, streams, consumers, key-value buckets, queue groups,
// inbox prefixes and accounts. No other package spells one; each builds and parses its subjects with the functions
// here, so that a subject cannot be written two ways. The spellings are a wire protocol: rigs in the field publish
// and subscribe to them, and the streams on a running cluster hold them, so none may change.
//
// A rig's subjects all have the form <prefix>.<provider_id>.<offering_id> (rigSubject), and the server lets each
// rig's user publish and subscribe to its own only (RigPermissions), so a subject names its sender truthfully.
//
// Config files outside Go that must spell a subject (deploy/nats/nats.conf, the NATS chart's values in
// deploy/k8s/nats-values.yaml) are tested against SharedWithRigs (deploy_test.go), and literals_test.go fails on a
// Go file elsewhere whose string literal looks like one of these subjects.

// Usage events, from the rigs' agents to the meter (package usage, docs/usage-stream.md).
const (
	// UsagePrefix is the first token of a rig's usage subject, usage.<provider_id>.<offering_id> (UsageSubject).
	UsagePrefix = "usage"
	// UsageStream is the JetStream stream that captures every usage subject (Below(UsagePrefix)).
	UsageStream = "USAGE"
	// UsageConsumer is the meter's durable consumer on UsageStream.
	UsageConsumer = "meter"
	// UsagePausedSubject is the only subject UsageStream listens on while its per-rig limit is lowered: no rig may
	// publish there (usage.ApplyPendingLimit).
	UsagePausedSubject = "usage_paused"
	// UsageConfigLockBucket is the key-value bucket in which one meter at a time locks UsageStream's
	// configuration.
	UsageConfigLockBucket = "USAGE_CONFIG_LOCK"
	// RejectedStream keeps copies of refused usage events, each on RejectedSubject(reason).
	RejectedStream = "USAGE_REJECTED"
	// RejectedPrefix is the first token of RejectedStream's subjects.
	RejectedPrefix = "usage_rejected"
	// MeteredSubject is the meter's feed of committed usage to the gateways (metering.FeedMessage). It is
	// outside Below(UsagePrefix), so UsageStream never stores it, and no rig may publish on it.
	MeteredSubject = "metered.usage"
	// CeilingBenchConsumer is the durable consumer on UsageStream that cmd/meterbench measures the stream's
	// ceilings with, apart from the meter's.
	CeilingBenchConsumer = "meterbench_ceiling"
)

// The platform's own core NATS subjects, between its processes; a rig may publish on none of them.
const (
	// ObservedSubject carries the gateway replicas' observations of their requests to one another
	// (routing.ObservedBatch).
	ObservedSubject = "routing.observed"
	// KeyChangesSubject carries the id of an API key that was revoked or whose limit changed, so that every
	// gateway forgets what it cached of it.
	KeyChangesSubject = "api_keys.changed"
)

// Heartbeats, from the rigs to the gateways (package routing).
const (
	// HeartbeatPrefix is the first token of a rig's heartbeat subject, heartbeat.<provider_id>.<offering_id>
	// (HeartbeatSubject).
	HeartbeatPrefix = "heartbeat"
	// HeartbeatRequestSubject is where a gateway that has just started asks every rig for a heartbeat now,
	// rather than at its next beat: a restarted gateway then routes within moments instead of a whole interval.
	// Rigs may subscribe to it; its messages carry nothing. A rig answers each with a heartbeat at once, but
	// sends at most one such extra heartbeat per quarter second (HeartbeatRequestGap), however many arrive.
	HeartbeatRequestSubject = "heartbeat_request"
)

// Calls to a rig. The platform never dials a rig: the rig's agent holds its NATS connection, and a gateway
// reaches it there (docs/rig-transport.md, package rigwire). A gateway publishes a call on the rig's
// RigCallRequestSubject, which the rig's agents share in RigCallQueue, naming the reply subject
// (RigAnswerSubject) under the calling gateway's own token; the agent names, in its first answer, the control
// subject (RigControlSubject, below the rig's call subject) where the gateway sends the call's body,
// acknowledgements and cancel. Each rig may subscribe to its own calls only and publish its own answers only, so
// no rig can read another's requests or answer for another.
const (
	// RigCallPrefix is the first token of the subjects a gateway publishes to a rig on.
	RigCallPrefix = "rigcall"
	// RigReplyPrefix is the first token of the subjects a rig publishes its answers on.
	RigReplyPrefix = "rigreply"
	// RigCallQueue is the queue group the agents of one offering share its calls in.
	RigCallQueue = "rig"
	// rigCallToken is the token below RigCallSubject that calls are published on; an agent's control subject
	// is below RigCallSubject too, under a unique token, which is never this one.
	rigCallToken = "call"
)

// Reply inboxes, and the accounts.
const (
	// rigInboxRoot is the first token of every rig's reply inbox, apart from nats.go's default _INBOX.
	rigInboxRoot = "_INBOX_RIG"
	// RigsAccount is the NATS account every rig's user is in, apart from the platform's own.
	RigsAccount = "RIGS"
	// PlatformAccount is the platform's own account on a cluster (deploy/nats/nats.conf); the embedded server
	// uses its global account in its place.
	PlatformAccount = "PLATFORM"
	// SystemAccount is the account whose user may list and close any connection on every server
	// (rigauth.Revoker).
	SystemAccount = "SYS"
)

// The auth callout and the system account's requests, named by nats-server; spelled here so that the platform
// need not link the server.
const (
	// AuthCalloutSubject is where nats-server sends each connection's authorization request, in the callout's
	// account (the platform's); server.AuthCalloutSubject.
	AuthCalloutSubject = "$SYS.REQ.USER.AUTH"
	// AuthCalloutQueue makes one responder answer each request where several platform processes run one.
	AuthCalloutQueue = "gpumarket-rigauth"
	// ConnzPingSubject asks every server of the cluster for its connections (server.serverPingReqSubj).
	ConnzPingSubject = "$SYS.REQ.SERVER.PING.CONNZ"
	// kickPrefix and kickToken surround a server's id in the subject that closes one of its connections.
	kickPrefix = "$SYS.REQ.SERVER"
	kickToken  = "KICK"
)

// AnyID is the wildcard that stands for any one id in a subject: UsageSubject(AnyID, AnyID) is every rig's usage
// subject.
const AnyID = "*"

// MaxIDLength is the longest provider or offering id a subject may carry, in bytes.
const MaxIDLength = 128

// Below is every subject below subject: subject.>.
func Below(subject string) string { return subject + ".>" }

// AnyToken is every subject one token below subject: subject.*.
func AnyToken(subject string) string { return subject + ".*" }

// Child is the subject one token below subject: subject.<tok>, tok a token (no '.', no wildcard).
func Child(subject, tok string) string { return subject + "." + tok }

// LastToken is the last token of a subject, where rigwire's subjects carry the call or control key.
func LastToken(subject string) string { return subject[strings.LastIndexByte(subject, '.')+1:] }

// UsageSubject is the subject a rig publishes its usage events on: usage.<provider_id>.<offering_id>.
func UsageSubject(providerID, offeringID string) string {
	return rigSubject(UsagePrefix, providerID, offeringID)
}

// ParseUsageSubject splits a subject written by UsageSubject into its provider and offering ids, each of which
// must pass CheckID.
func ParseUsageSubject(subject string) (providerID, offeringID string, err error) {
	return parseRigSubject(UsagePrefix, subject)
}

// UsageSubjectIDs is what a usage subject names as its provider and offering ids: its second and third tokens, as
// far as it has them, unchecked. The meter counts a refused event against the rig whose subject it came on, even
// one ParseUsageSubject refuses.
func UsageSubjectIDs(subject string) (providerID, offeringID string) {
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) > 1 {
		providerID = parts[1]
	}
	if len(parts) > 2 {
		offeringID = parts[2]
	}
	return providerID, offeringID
}

// RejectedSubject is the subject RejectedStream keeps a refused usage event under: usage_rejected.<reason>.
func RejectedSubject(reason string) string { return Child(RejectedPrefix, reason) }

// HeartbeatSubject is the subject a rig publishes its load on: heartbeat.<provider_id>.<offering_id>.
func HeartbeatSubject(providerID, offeringID string) string {
	return rigSubject(HeartbeatPrefix, providerID, offeringID)
}

// ParseHeartbeatSubject splits a subject written by HeartbeatSubject into its provider and offering ids, each of
// which must pass CheckID.
func ParseHeartbeatSubject(subject string) (providerID, offeringID string, err error) {
	return parseRigSubject(HeartbeatPrefix, subject)
}

// RigInboxPrefix is the reply-inbox prefix a rig's connection must use (nats.CustomInboxPrefix): the only
// subjects it may subscribe to are below it.
func RigInboxPrefix(providerID, offeringID string) string {
	return rigSubject(rigInboxRoot, providerID, offeringID)
}

// RigCallSubject is the rig's call subject space: rigcall.<provider_id>.<offering_id>. The rig subscribes to it
// and to everything below it (calls and control messages).
func RigCallSubject(providerID, offeringID string) string {
	return rigSubject(RigCallPrefix, providerID, offeringID)
}

// RigCallRequestSubject is where a gateway publishes a call to the rig: rigcall.<provider_id>.<offering_id>.call.
func RigCallRequestSubject(providerID, offeringID string) string {
	return Child(RigCallSubject(providerID, offeringID), rigCallToken)
}

// RigControlSubject is the subject below which one of the rig's agents takes the gateways' messages about its
// calls: rigcall.<provider_id>.<offering_id>.<agent token>. The agent subscribes to AnyToken(it) and names
// Child(it, key) to the gateway as the control subject of each call; agentToken is unique (NewToken).
func RigControlSubject(providerID, offeringID, agentToken string) string {
	return Child(RigCallSubject(providerID, offeringID), agentToken)
}

// RigReplySubject is the rig's answer subject space: rigreply.<provider_id>.<offering_id>. A call names the
// subject below it where its answer goes (RigAnswerSubject).
func RigReplySubject(providerID, offeringID string) string {
	return rigSubject(RigReplyPrefix, providerID, offeringID)
}

// RigAnswerSubject is where the rig answers one call of a gateway:
// rigreply.<provider_id>.<offering_id>.<gateway token>.<call id>, the call id a token.
func RigAnswerSubject(providerID, offeringID, gatewayToken, callID string) string {
	return Child(Child(RigReplySubject(providerID, offeringID), gatewayToken), callID)
}

// RigAnswersSubject is every answer, from any rig, to the calls of the gateway with gatewayToken: the one
// subscription a gateway needs. LastToken of each message's subject is its call id.
func RigAnswersSubject(gatewayToken string) string {
	return AnyToken(Child(RigReplySubject(AnyID, AnyID), gatewayToken))
}

// NewToken is a token unique to this process and call, for a subject of one gateway or one agent: nats.go's
// inbox name without its _INBOX. prefix.
func NewToken() string { return strings.TrimPrefix(nats.NewInbox(), nats.InboxPrefix) }

// KickSubject closes one connection of the server with the given id (server.clientKickReqSubj):
// $SYS.REQ.SERVER.<server id>.KICK.
func KickSubject(serverID string) string { return Child(Child(kickPrefix, serverID), kickToken) }

// rigSubject is prefix.<provider_id>.<offering_id>. Both ids must be subject tokens (CheckID), which the
// platform's ids are.
func rigSubject(prefix, providerID, offeringID string) string {
	return Child(Child(prefix, providerID), offeringID)
}

// parseRigSubject splits a subject written by rigSubject(prefix, ...) into its ids.
func parseRigSubject(prefix, subject string) (providerID, offeringID string, err error) {
	rest, prefixed := strings.CutPrefix(subject, prefix+".")
	providerID, offeringID, two := strings.Cut(rest, ".")
	if !prefixed || !two || strings.Contains(offeringID, ".") {
		return "", "", fmt.Errorf("subject %.200q is not %s.<provider_id>.<offering_id>", subject, prefix)
	}
	for _, id := range []string{providerID, offeringID} {
		if err := CheckID(id); err != nil {
			return "", "", fmt.Errorf("subject %.200q: %w", subject, err)
		}
	}
	return providerID, offeringID, nil
}

// CheckID accepts a provider or offering id, as a rig's subjects carry it: 1 to MaxIDLength ASCII letters,
// digits, '-' and '_', so never a wildcard, a separator or a space.
func CheckID(s string) error {
	if s == "" || len(s) > MaxIDLength {
		return fmt.Errorf("an id must be 1 to %d characters", MaxIDLength)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') && c != '_' && c != '-' {
			return fmt.Errorf("id %.200q may hold only ASCII letters, digits, - and _", s)
		}
	}
	return nil
}

// SharedSubject is a subject the platform's account and RigsAccount share: exported by one, imported by the other.
// Within RigsAccount each rig's user may use only its own subjects of it (RigPermissions).
type SharedSubject struct {
	// Subject is a wildcard over every rig's subjects.
	Subject string
	// Service is set for a service export (requests, whose replies go back to the requester's inbox); a stream
	// export carries messages one way.
	Service bool
	// FromRigs is set when RigsAccount exports the subject to the platform's account; otherwise the platform
	// exports it to RigsAccount.
	FromRigs bool
}

// SharedWithRigs is everything the platform's account and RigsAccount share, and nothing else: the embedded
// server's accounts (package natsserver) and a cluster's (deploy/nats/nats.conf, deploy/k8s/nats-values.yaml)
// are both this list.
func SharedWithRigs() []SharedSubject {
	calls := RigCallSubject(AnyID, AnyID)
	return []SharedSubject{
		// A rig's usage event, and the stream's acknowledgement back to the rig's own inbox.
		{Subject: UsageSubject(AnyID, AnyID), Service: true},
		// The rigs' heartbeats.
		{Subject: HeartbeatSubject(AnyID, AnyID), FromRigs: true},
		// A gateway that has just started asks every rig for a heartbeat.
		{Subject: HeartbeatRequestSubject},
		// A gateway's calls to a rig, and its control messages below them.
		{Subject: calls},
		{Subject: Below(calls)},
		// The rigs' answers.
		{Subject: Below(RigReplySubject(AnyID, AnyID)), FromRigs: true},
	}
}
