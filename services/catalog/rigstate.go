package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// RigState is what the platform has observed of a listing's rig, apart from its provider's choice (Status):
// only an offering whose Status and RigState are both active is in the public catalog and routed
// (docs/listing-states.md).
type RigState string

const (
	// RigPending: listed, not yet qualified. Its agent has not connected, or it has not passed
	// ProbesToQualify probes in a row.
	RigPending RigState = "pending"
	// RigActive: qualified by the platform's probes and heard from within OfflineAfter.
	RigActive RigState = "active"
	// RigOffline: no heartbeat for OfflineAfter; it must qualify again by probes.
	RigOffline RigState = "offline"
)

const (
	// ProbesToQualify is how many probes in a row a pending or offline rig must pass to become active. Every
	// gateway replica's probes count, each once.
	ProbesToQualify = 3
	// OfflineAfter is how long a rig may go without a heartbeat before it is offline. Agents beat every 5 s:
	// twelve beats lost in a row is no network blip.
	OfflineAfter = 60 * time.Second
)

// ProbeResult is how one of the platform's probes of a pending or offline rig went: a streamed chat request
// through the real path, passed when its answer was a valid OpenAI stream naming the listed model.
type ProbeResult struct {
	At      time.Time
	Passed  bool
	Problem string // why it failed, in the provider's words; "" when it passed
	// What it measured; zero when the probe produced no token.
	TTFTMs       float64
	TokensPerSec float64
}

// maxProbeProblem bounds what a probe's failure may store (the column's check).
const maxProbeProblem = 500

// RigStateReason says where the rig stands and why, in its provider's words: "Pending: waiting for your agent
// to connect", "Pending: 2 of 3 probes passed", "Offline: no heartbeat since 14:02 UTC", "Active since 14:05
// UTC". Times are UTC, with the date unless it is now's.
func (o Offering) RigStateReason(now time.Time) string {
	passed := fmt.Sprintf("%d of %d probes passed", o.RigProbePasses, ProbesToQualify)
	if o.RigProbeProblem != "" {
		passed += "; the last one failed: " + o.RigProbeProblem
	}
	switch o.RigState {
	case RigActive:
		return "Active since " + clockTime(o.RigStateSince, now)
	case RigOffline:
		if o.RigHeartbeatAt != nil && o.RigHeartbeatAt.After(o.RigStateSince) {
			return "Offline since " + clockTime(o.RigStateSince, now) + ": heartbeats are back, " + passed
		}
		if o.RigHeartbeatAt == nil {
			return "Offline: no heartbeat since " + clockTime(o.RigStateSince, now)
		}
		return "Offline: no heartbeat since " + clockTime(*o.RigHeartbeatAt, now)
	default:
		if o.RigHeartbeatAt == nil {
			return "Pending: waiting for your agent to connect"
		}
		return "Pending: " + passed
	}
}

// clockTime is "14:02 UTC", or "14:02 UTC on 3 Dec 2026" on another day than now's.
func clockTime(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04 UTC")
	}
	return t.Format("15:04 UTC on 2 Jan 2006")
}

// uuidShape is an offering id as PostgreSQL prints it; anything else names no offering.
var uuidShape = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// RecordHeartbeats writes down when each offering's rig was last heard from (offering id to the time a
// gateway received its heartbeat), never moving a time back: every gateway replica writes what it heard, and
// OfflineAfter is judged on the latest any of them did. With the time goes what that heartbeat said of the APIs
// the rig serves natively (only the names of NativeMessages and NativeResponses are kept). Ids that are not an
// offering's are skipped.
func (s *Service) RecordHeartbeats(ctx context.Context, heard map[string]Heard) (err error) {
	defer services.Wrap(&err, "catalog.RecordHeartbeats(%d)", len(heard))
	ids := make([]string, 0, len(heard))
	ats := make([]time.Time, 0, len(heard))
	natives := make([]string, 0, len(heard))
	for id, h := range heard {
		if uuidShape.MatchString(id) {
			ids, ats = append(ids, id), append(ats, h.At.UTC())
			natives = append(natives, strings.Join(knownNativeAPIs(h.Native), ","))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err = s.pool.Exec(ctx, `UPDATE offerings o SET rig_heartbeat_at = h.at,
			rig_native_apis = coalesce(string_to_array(nullif(h.native, ''), ','), '{}')
		FROM unnest($1::uuid[], $2::timestamptz[], $3::text[]) AS h (id, at, native)
		WHERE o.id = h.id AND (o.rig_heartbeat_at IS NULL OR o.rig_heartbeat_at < h.at)`, ids, ats, natives)
	return err
}

// Heard is what a router heard of a rig: its last heartbeat's time, by the router's clock, and the APIs its
// agent said the engine serves natively.
type Heard struct {
	At     time.Time
	Native []string
}

// The APIs besides chat completions a rig's engine may serve natively, as agents name them in heartbeats.
const (
	NativeMessages  = "messages"  // the Anthropic Messages API, POST /v1/messages
	NativeResponses = "responses" // the OpenAI Responses API, POST /v1/responses
)

// APIsServed says, in its provider's words, how the gateway serves the Anthropic Messages and OpenAI Responses
// APIs on the rig, from what its agent last said: "" until the agent has been heard from.
func (o Offering) APIsServed() string {
	if o.RigHeartbeatAt == nil {
		return ""
	}
	messages, responses := slices.Contains(o.RigNativeAPIs, NativeMessages), slices.Contains(o.RigNativeAPIs, NativeResponses)
	switch {
	case messages && responses:
		return "Anthropic Messages and OpenAI Responses: passed to its engine, which serves both natively."
	case messages:
		return "Anthropic Messages: passed to its engine natively; OpenAI Responses: translated to chat completions."
	case responses:
		return "OpenAI Responses: passed to its engine natively; Anthropic Messages: translated to chat completions."
	}
	return "Anthropic Messages and OpenAI Responses: translated to chat completions (its engine serves neither natively)."
}

// APIsServedBrief is APIsServed in a few words, for a table's cell: "Messages, Responses: native".
func (o Offering) APIsServedBrief() string {
	if o.RigHeartbeatAt == nil {
		return ""
	}
	messages, responses := slices.Contains(o.RigNativeAPIs, NativeMessages), slices.Contains(o.RigNativeAPIs, NativeResponses)
	switch {
	case messages && responses:
		return "Messages, Responses: native"
	case messages:
		return "Messages: native; Responses: translated"
	case responses:
		return "Responses: native; Messages: translated"
	}
	return "Messages, Responses: translated"
}

// knownNativeAPIs is the names in native that name an API, in order, each once: a heartbeat's list is a rig's
// word, and only these are kept.
func knownNativeAPIs(native []string) []string {
	var out []string
	for _, api := range []string{NativeMessages, NativeResponses} {
		if slices.Contains(native, api) {
			out = append(out, api)
		}
	}
	return out
}

// MarkOffline turns offline every listed rig not heard from since silentSince (now less OfflineAfter), and
// returns their ids: the catalog and routing leave them, and they must qualify again. A pending rig never
// heard from stays pending (its agent never connected); an active one is judged from its last heartbeat or
// from when it became active, the later. Conditional on the state it finds, so replicas that
// decide at once change each rig once.
func (s *Service) MarkOffline(ctx context.Context, silentSince, now time.Time) (_ []string, err error) {
	defer services.Wrap(&err, "catalog.MarkOffline")
	var ids []string
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE offerings SET rig_state = 'offline', rig_state_since = $2,
				rig_probe_passes = 0, rig_probe_problem = ''
			WHERE rig_state <> 'offline' AND status <> 'delisted'
				AND greatest(rig_heartbeat_at, CASE WHEN rig_state = 'active' THEN rig_state_since END) < $1
			RETURNING id::text, provider_account_id::text, model, rig_heartbeat_at`, silentSince.UTC(), now.UTC())
		if err != nil {
			return err
		}
		offline, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RigOfflineEvent, error) {
			e := RigOfflineEvent{RigState: RigOffline, OfflineSince: now.UTC()}
			err := r.Scan(&e.OfferingID, &e.providerID, &e.Model, &e.LastHeartbeatAt)
			return e, err
		})
		if err != nil {
			return err
		}
		for _, e := range offline {
			ids = append(ids, e.OfferingID)
			if s.events == nil {
				continue
			}
			key := fmt.Sprintf("%s:%s:%d", EventRigOffline, e.OfferingID, now.UnixMicro())
			if err := s.events.Emit(ctx, tx, e.providerID, EventRigOffline, key, e); err != nil {
				return err
			}
		}
		return nil
	})
	return ids, err
}

// EventRigOffline is the webhook event of a provider's listed rig gone offline.
const EventRigOffline = "rig.offline"

// RigOfflineEvent is the data of a rig.offline event: the offering whose rig went silent.
type RigOfflineEvent struct {
	OfferingID      string     `json:"offering_id"`
	Model           string     `json:"model"`
	RigState        RigState   `json:"rig_state"` // "offline"
	OfflineSince    time.Time  `json:"offline_since"`
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at"` // null: never heard from
	providerID      string
}

// RecordProbe records a probe of a pending or offline rig and returns the rig's state after it: a pass counts
// towards ProbesToQualify in a row, the one that reaches it makes the rig active; a failure starts the count
// again and keeps its problem for the provider to read. A probe of a rig that is active already, delisted or
// unknown changes nothing and returns "".
func (s *Service) RecordProbe(ctx context.Context, offeringID string, r ProbeResult) (_ RigState, err error) {
	defer services.Wrap(&err, "catalog.RecordProbe(%s)", offeringID)
	problem := r.Problem
	if r.Passed {
		problem = ""
	} else if problem == "" {
		problem = "its answer was not accepted"
	}
	if len(problem) > maxProbeProblem {
		problem = problem[:maxProbeProblem-3] + "..."
	}
	var ttft, tps *float64
	if r.TTFTMs > 0 {
		ttft = &r.TTFTMs
	}
	if r.TokensPerSec > 0 {
		tps = &r.TokensPerSec
	}
	var state RigState
	// Every right-hand side reads the row as it was: rig_probe_passes + 1 is the count this pass makes.
	err = s.pool.QueryRow(ctx, `UPDATE offerings SET
			rig_probe_passes = CASE WHEN $2 THEN rig_probe_passes + 1 ELSE 0 END,
			rig_probe_problem = $3, rig_probe_at = $4, rig_probe_ttft_ms = $5, rig_probe_tokens_per_sec = $6,
			rig_state = CASE WHEN $2 AND rig_probe_passes + 1 >= $7 THEN 'active' ELSE rig_state END,
			rig_state_since = CASE WHEN $2 AND rig_probe_passes + 1 >= $7 THEN $4 ELSE rig_state_since END
		WHERE id = $1 AND rig_state <> 'active' AND status <> 'delisted'
		RETURNING rig_state`,
		offeringID, r.Passed, problem, r.At.UTC(), ttft, tps, ProbesToQualify).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) || isInvalidText(err) {
		return "", nil
	}
	return state, err
}

// MarkQualified makes a listed rig active as if it had passed its probes, now. The product never calls it:
// it is for tests and tools whose rigs the probes are not there to judge (their subject is elsewhere), so
// that they need not wait for ProbesToQualify probes. The rig still goes offline without heartbeats.
func (s *Service) MarkQualified(ctx context.Context, offeringID string) (err error) {
	defer services.Wrap(&err, "catalog.MarkQualified(%s)", offeringID)
	tag, err := s.pool.Exec(ctx, `UPDATE offerings SET rig_state = 'active', rig_state_since = $2,
			rig_probe_passes = $3, rig_probe_problem = ''
		WHERE id = $1 AND status <> 'delisted'`, offeringID, s.now().UTC(), ProbesToQualify)
	if isInvalidText(err) || (err == nil && tag.RowsAffected() == 0) {
		return errNotFound
	}
	return err
}
