package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"
)

// Rig credentials. Every rig (one provider's agent serving one offering) authenticates with its own user, and the
// server lets that user publish only the rig's own subjects, so a subject names its sender truthfully: a rig
// cannot report usage, or a heartbeat, for another offering or another provider. On every NATS server the platform
// uses, embedded or a cluster, rigs are let in by nats-server's auth callout, which the platform answers
// (package services/rigauth) with a user in RigsAccount allowed exactly RigPermissions.
//
// What a rig may do, and why each permission is there:
//   - publish usage.<provider_id>.<offering_id> (UsageSubject): its usage events, captured by UsageStream.
//   - publish heartbeat.<provider_id>.<offering_id> (HeartbeatSubject): its load, read by the gateway.
//   - subscribe Below(RigInboxPrefix(provider_id, offering_id)): a JetStream publish is a request, and the
//     stream's acknowledgement comes back to the publisher's reply inbox, so the rig must be allowed to subscribe
//     there. It needs nothing under $JS.API: publishing to a stream's subject is an ordinary publish.
//   - subscribe HeartbeatRequestSubject: a gateway that has just started asks there for a heartbeat now, and the
//     rig answers with one on its heartbeat subject. The requests carry nothing, and every rig receives the same.
//   - subscribe its calls and publish its replies (RigCallSubject, RigReplySubject, in subjects.go).
//
// The inbox is the rig's own rather than the usual _INBOX.>: whoever may subscribe _INBOX.> receives every reply
// sent to any client in the account, among them the batches of usage events the meter fetches (a pull consumer
// delivers to the fetcher's inbox) with other providers' tickets and traffic. The agent sets its inbox prefix with
// nats.CustomInboxPrefix(RigInboxPrefix(...)); nats.go's JetStream client takes its reply subjects from it.
//
// The rigs' users are in an account of their own, RigsAccount, which shares only the usage, heartbeat, call and
// reply subjects with the platform's (SharedWithRigs; docs/usage-stream.md, "The rigs' entry point";
// deploy/nats/nats.conf writes the same accounts for a cluster).

// rigPasswordLabel separates rig passwords from anything else the platform derives from the same key.
const rigPasswordLabel = "gpumarket rig NATS password v1\x00"

// HeartbeatRequestGap is the least time between two heartbeats a rig sends because it was asked: a request that
// comes sooner after the last such heartbeat is answered when the gap has passed, and any number of requests
// meanwhile by that one heartbeat.
const HeartbeatRequestGap = 250 * time.Millisecond

// RigUsername is the NATS user name of the rig serving an offering. Offering ids are unique across providers,
// so the offering alone names the rig.
func RigUsername(offeringID string) string {
	return "rig-" + offeringID
}

// RigPassword derives the NATS password of an offering's rig from a platform secret, for the credential's first
// issue: RigPasswordIssue(key, offeringID, 1).
func RigPassword(key []byte, offeringID string) string {
	return RigPasswordIssue(key, offeringID, 1)
}

// RigPasswordIssue derives the NATS password of an offering's rig for one issue of its credential: HMAC-SHA256 of
// the offering id (and, from the second issue on, the issue number), base64url without padding (43 characters,
// safe in a URL and a config file). The platform stores no rig password: it recomputes one to let a rig in and to
// show a provider the credential of its rig, and the key cannot be recovered from it. A provider re-issuing the
// credential moves the offering's issue on (catalog.Service.ReissueRigCredential), which makes the earlier
// password useless; rotating the key changes every rig's password at once. An issue below 1 is the first.
func RigPasswordIssue(key []byte, offeringID string, issue int) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(rigPasswordLabel))
	m.Write([]byte(offeringID))
	if issue > 1 {
		// The first issue is the password rigs held before credentials were re-issuable.
		m.Write([]byte("\x00issue " + strconv.Itoa(issue)))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// RigPermissions is everything the rig serving an offering may publish and subscribe to, and nothing else: the
// one list every way of letting a rig in grants (the embedded server's, the auth callout's).
func RigPermissions(providerID, offeringID string) (publish, subscribe []string) {
	return []string{
			UsageSubject(providerID, offeringID),
			HeartbeatSubject(providerID, offeringID),
			Below(RigReplySubject(providerID, offeringID)),
		}, []string{
			Below(RigInboxPrefix(providerID, offeringID)),
			HeartbeatRequestSubject,
			RigCallSubject(providerID, offeringID),
			Below(RigCallSubject(providerID, offeringID)),
		}
}
