package metering

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/usage"

	"github.com/jackc/pgx/v5"
)

// Refused events are counted per rig, reason and hour (usage_rejection_counts), and the first
// MeterConfig.RejectionSamples of each are kept whole (usage_rejections) and copied to the
// USAGE_REJECTED stream, so that a rig sending forged events without end fills neither. A
// message is counted once however often the stream delivers it: the messages counted are
// remembered (usage_rejections_counted) until the consumer's acknowledgement floor passes
// them, after which the stream cannot deliver them again. See docs/metering-integrity.md.

// rig is the provider and offering of a usage subject (events.UsageSubject), as far as
// the subject names them: a refusal is counted against the rig whose subject it came on.
type rig struct{ provider, offering string }

func rigOf(subject string) rig {
	provider, offering := events.UsageSubjectIDs(subject)
	return rig{provider: truncate(provider, usage.MaxIDLength), offering: truncate(offering, usage.MaxIDLength)}
}

// rejectionKey is a row of usage_rejection_counts.
type rejectionKey struct {
	hour   time.Time
	rig    rig
	reason usage.RejectReason
}

func (k rejectionKey) compare(o rejectionKey) int {
	if c := k.hour.Compare(o.hour); c != 0 {
		return c
	}
	return strings.Compare(k.rig.provider+"\x00"+k.rig.offering+"\x00"+string(k.reason),
		o.rig.provider+"\x00"+o.rig.offering+"\x00"+string(o.reason))
}

// insertRejections counts the refused events that were not counted before and keeps whole
// those of them that are among the first RejectionSamples of their rig, reason and hour. It
// returns the ones it kept.
func (m *Meter) insertRejections(ctx context.Context, tx pgx.Tx, rs []StoredRejection, now time.Time) ([]StoredRejection, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	fresh, err := countedFirstTime(ctx, tx, rs)
	if err != nil || len(fresh) == 0 {
		return nil, err
	}

	hour := now.UTC().Truncate(time.Hour)
	groups := map[rejectionKey][]int{} // indexes into fresh, in order
	var keys []rejectionKey
	for i, r := range fresh {
		k := rejectionKey{hour: hour, rig: rigOf(r.Subject), reason: r.Reason}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	// Upserted in key order, so that two committers lock count rows in one order.
	slices.SortFunc(keys, rejectionKey.compare)
	n := len(keys)
	hours, providers, offerings, reasons := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	counts := make([]int64, n)
	for i, k := range keys {
		hours[i], providers[i], offerings[i], reasons[i] = k.hour, k.rig.provider, k.rig.offering, string(k.reason)
		counts[i] = int64(len(groups[k]))
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO usage_rejection_counts AS c (hour, provider_id, offering_id, reason, rejected, last_at)
		SELECT hour, provider_id, offering_id, reason, rejected, $6
		FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::bigint[]) WITH ORDINALITY
			AS r (hour, provider_id, offering_id, reason, rejected, n)
		ORDER BY n
		ON CONFLICT (hour, provider_id, offering_id, reason) DO UPDATE SET
			rejected = c.rejected + EXCLUDED.rejected, last_at = greatest(c.last_at, EXCLUDED.last_at)
		RETURNING hour, provider_id, offering_id, reason, rejected`, hours, providers, offerings, reasons, counts, now)
	if err != nil {
		return nil, err
	}
	totals := make(map[rejectionKey]int64, n)
	for rows.Next() {
		var k rejectionKey
		var reason string
		var total int64
		if err := rows.Scan(&k.hour, &k.rig.provider, &k.rig.offering, &reason, &total); err != nil {
			rows.Close()
			return nil, err
		}
		k.hour, k.reason = k.hour.UTC(), usage.RejectReason(reason)
		totals[k] = total
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}

	// The row is locked by this transaction until it commits, so the count before this batch
	// is exact: the samples are the first RejectionSamples of the hour, whoever counted them.
	var samples []StoredRejection
	for _, k := range keys {
		idx := groups[k]
		before := totals[k] - int64(len(idx))
		room := max(0, int64(m.cfg.RejectionSamples)-before)
		for _, i := range idx[:min(int64(len(idx)), room)] {
			samples = append(samples, fresh[i])
		}
	}
	return samples, insertSamples(ctx, tx, samples, now)
}

// countedFirstTime records the messages of rs as counted and returns those not counted
// before: a message delivered again after its batch committed is not counted twice.
func countedFirstTime(ctx context.Context, tx pgx.Tx, rs []StoredRejection) ([]StoredRejection, error) {
	type message struct {
		seq uint64
		sum [sha256.Size]byte
	}
	ms := make([]message, len(rs))
	for i, r := range rs {
		ms[i] = message{seq: r.Seq, sum: sha256.Sum256(r.Data)}
	}
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(ms[a].seq, ms[b].seq); c != 0 {
			return c
		}
		return bytes.Compare(ms[a].sum[:], ms[b].sum[:])
	})
	seqs, sums := make([]int64, len(ms)), make([][]byte, len(ms))
	for i, j := range order {
		seqs[i], sums[i] = int64(ms[j].seq), ms[j].sum[:]
	}
	rows, err := tx.Query(ctx, `INSERT INTO usage_rejections_counted (stream_seq, raw_sha256)
		SELECT stream_seq, raw_sha256 FROM unnest($1::bigint[], $2::bytea[]) WITH ORDINALITY AS m (stream_seq, raw_sha256, n)
		ORDER BY n
		ON CONFLICT DO NOTHING
		RETURNING stream_seq, raw_sha256`, seqs, sums)
	if err != nil {
		return nil, err
	}
	counted := map[message]bool{}
	for rows.Next() {
		var seq int64
		var sum []byte
		if err := rows.Scan(&seq, &sum); err != nil {
			rows.Close()
			return nil, err
		}
		var m message
		m.seq = uint64(seq)
		copy(m.sum[:], sum)
		counted[m] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fresh := make([]StoredRejection, 0, len(counted))
	for i, r := range rs {
		if counted[ms[i]] {
			fresh = append(fresh, r)
			delete(counted, ms[i]) // the same message twice in one batch is one
		}
	}
	return fresh, nil
}

// insertSamples keeps refused events whole, for review.
func insertSamples(ctx context.Context, tx pgx.Tx, rs []StoredRejection, now time.Time) error {
	if len(rs) == 0 {
		return nil
	}
	n := len(rs)
	seqs, subjects, ids, reasons, details, raws := make([]int64, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([][]byte, n)
	for i, r := range rs {
		seqs[i], subjects[i], ids[i], reasons[i] = int64(r.Seq), r.Subject, r.EventID, string(r.Reason)
		details[i], raws[i] = truncate(r.Detail, 1000), r.Data
	}
	_, err := tx.Exec(ctx, `INSERT INTO usage_rejections (stream_seq, subject, event_id, reason, detail, raw, received_at)
		SELECT stream_seq, subject, event_id, reason, detail, raw, $7
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[])
			AS r (stream_seq, subject, event_id, reason, detail, raw)
		ON CONFLICT (stream_seq, raw_sha256) DO NOTHING`, seqs, subjects, ids, reasons, details, raws, now)
	return err
}

// forgetCounted forgets the counted messages at or below the consumer's acknowledgement floor:
// the stream delivers none of them again.
func (m *Meter) forgetCounted(ctx context.Context, ackFloor uint64) error {
	if ackFloor == 0 {
		return nil
	}
	_, err := m.cfg.Pool.Exec(ctx, `DELETE FROM usage_rejections_counted WHERE stream_seq <= $1`, int64(ackFloor))
	return err
}
