package metering

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services/events"
	"github.com/gpumarket/gpumarket/services/fixtures"
	"github.com/gpumarket/gpumarket/services/ticket"
)

// An event id or a request id is metered once over all months, though usage_events keeps each
// month in a partition of its own whose indexes know nothing of the others: a second event for
// an event id or a request id of November, in December, is refused as a duplicate; and every
// row is in its own month's partition (docs/usage-storage.md).
func TestKeysHoldAcrossMonths(t *testing.T) {
	e := setupMeter(t)
	subject := events.UsageSubject(e.provider, e.offering)
	e.now = time.Date(2026, 12, 1, 0, 10, 0, 0, time.UTC)
	november, december := time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 5, 0, 0, time.UTC)
	id1, ev1, req1 := e.routed(t, route{in: 100, out: 100, at: november})
	e.publish(t, subject, id1, ev1)
	e.drain(t)

	// The same event id in December, for another request.
	_, sameEvent, _ := e.routed(t, route{in: 999, out: 999, at: december})
	sameEvent = []byte(strings.Replace(string(sameEvent), `"id":"evt_2"`, `"id":"`+id1+`"`, 1))
	// The same request id in December, under another event id (its ticket names that request).
	_, sameRequest, req3 := e.routed(t, route{in: 777, out: 777, at: december, ticket: func(c *ticket.Claims) { c.RequestID = req1 }})
	sameRequest = []byte(strings.ReplaceAll(string(sameRequest), `"`+req3+`"`, `"`+req1+`"`)) // its subject and request_id
	// And a new event of December, in the same batch.
	id4, ev4 := e.event(t, 10, 20, december)
	e.publish(t, subject, "", sameEvent)
	e.publish(t, subject, "", sameRequest)
	e.publish(t, subject, id4, ev4)
	e.drain(t)

	if got := e.rejected(t); got["duplicate"] != 2 || len(got) != 1 {
		t.Errorf("rejections %v, want the 2 duplicates", got)
	}
	e.wantBalances(t, charge(100, 100)+charge(10, 20), payable(100, 100)+payable(10, 20))
	rows, err := e.pool.Query(context.Background(), `SELECT event_id, tableoid::regclass::text FROM usage_events ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for rows.Next() {
		var id, part string
		if err := rows.Scan(&id, &part); err != nil {
			t.Fatal(err)
		}
		where[id] = part
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(where) != 2 || where[id1] != "usage_events_2026_11" || where[id4] != "usage_events_2026_12" {
		t.Errorf("usage rows in %v, want %s in usage_events_2026_11 and %s in usage_events_2026_12", where, id1, id4)
	}
	if n := e.count(t, `SELECT count(*) FROM usage_event_keys WHERE event_id = ANY ($1) AND request_id <> $2`, []string{id1, id4}, req3); n != 2 {
		t.Errorf("%d key rows of the stored events, want 2", n)
	}
}

// The meter makes the month of an event it is handed that has no partition yet (here, a clock
// years ahead of any month made ahead), so its row goes to its month and never to the DEFAULT
// partition.
func TestMeterMakesTheMonthOfItsEvents(t *testing.T) {
	e := setupMeter(t)
	e.now = time.Date(2034, 7, 2, 9, 0, 0, 0, time.UTC)
	price := fixtures.Price(t, e.pool, "standard", time.Date(2034, 1, 1, 0, 0, 0, 0, time.UTC), 150000, 300000)
	id, ev, _ := e.routed(t, route{in: 10, out: 20, at: e.now.Add(-time.Minute), ticket: func(c *ticket.Claims) { c.PriceID = price }})
	e.publish(t, events.UsageSubject(e.provider, e.offering), id, ev)
	e.drain(t)
	var part string
	if err := e.pool.QueryRow(context.Background(), `SELECT tableoid::regclass::text FROM usage_events WHERE event_id = $1`, id).
		Scan(&part); err != nil {
		t.Fatal(err)
	}
	if part != "usage_events_2034_07" {
		t.Errorf("the row is in %s, want usage_events_2034_07", part)
	}
}
