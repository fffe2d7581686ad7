package metering

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpumarket/gpumarket/services/events"
)

// A batch the database refuses for what one of its events holds is split until that event is
// found and refused with the database's reason, while the rest is metered: here the database
// refuses one event by a check constraint (an integrity violation) and another by a trigger
// that finds its value out of range (a data exception).
func TestMeterSplitsABatchTheDatabaseRefuses(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	logs := newLogCounter("not committed", "splitting")
	cfg := e.meter.cfg
	cfg.Log = slog.New(logs)
	e.meter = NewMeter(cfg)
	subject := events.UsageSubject(e.provider, e.offering)
	at := e.now.Add(-time.Minute)

	const events = 64
	var msgs []*nats.Msg
	var poisonCheck, poisonRange string
	for i := range events {
		id, body, req := e.routed(t, route{in: 100, out: 10, at: at})
		msgs = append(msgs, usageMsg(subject, id, body))
		switch i {
		case 17:
			poisonCheck = req
		case 42:
			poisonRange = req
		}
	}
	if _, err := e.pool.Exec(ctx, `ALTER TABLE usage_events ADD CONSTRAINT test_refused CHECK (request_id <> '`+poisonCheck+`')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `
		CREATE FUNCTION test_out_of_range() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.request_id = '`+poisonRange+`' THEN
				RAISE EXCEPTION 'value out of range for the test' USING ERRCODE = 'numeric_value_out_of_range';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_out_of_range BEFORE INSERT ON usage_events FOR EACH ROW EXECUTE FUNCTION test_out_of_range();`); err != nil {
		t.Fatal(err)
	}
	e.publishAll(t, msgs)
	e.drain(t)

	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != events-2 {
		t.Errorf("%d usage rows, want the %d events the database takes", n, events-2)
	}
	got := e.rejected(t)
	if len(got) != 2 || got[string(RejectRefusedByDatabase)] != 1 || got[string(RejectOverflow)] != 1 {
		t.Errorf("rejections %v, want one refused_by_database and one overflow", got)
	}
	var reason string
	if err := e.pool.QueryRow(ctx, `SELECT reason FROM usage_rejections WHERE event_id = (SELECT 'evt_' || substr($1, 5))`,
		poisonCheck).Scan(&reason); err != nil || reason != string(RejectRefusedByDatabase) {
		t.Errorf("the event the check refused is kept as %q (%v)", reason, err)
	}
	e.wantBalances(t, (events-2)*charge(100, 10), (events-2)*payable(100, 10))
	// Splitting 64 events to find two takes at most two paths of six halvings; nothing is
	// retried whole.
	if n := logs.count("splitting"); n == 0 || n > 12 {
		t.Errorf("the batch was split %d times, want between 1 and 12", n)
	}
	if n := logs.count("not committed"); n != 0 {
		t.Errorf("%d batches retried: a refusal of the database for an event is not a fault to wait out", n)
	}
}

// A fault of the database (here, two serialization failures in a row) makes the batch wait
// and be tried again whole: nothing is refused, nothing is split, everything is billed once.
func TestMeterRetriesABatchThroughAFaultOfTheDatabase(t *testing.T) {
	e := setupMeter(t)
	ctx := context.Background()
	logs := newLogCounter("not committed", "splitting")
	cfg := e.meter.cfg
	cfg.Log = slog.New(logs)
	e.meter = NewMeter(cfg)
	subject := events.UsageSubject(e.provider, e.offering)
	const events = 20
	var msgs []*nats.Msg
	for range events {
		id, body, _ := e.routed(t, route{in: 100, out: 10, at: e.now.Add(-time.Minute)})
		msgs = append(msgs, usageMsg(subject, id, body))
	}
	// A sequence is not rolled back with the transaction that draws from it: the first two
	// attempts fail, the third goes through.
	if _, err := e.pool.Exec(ctx, `
		CREATE SEQUENCE test_faults;
		CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('test_faults') <= 2 THEN
				RAISE EXCEPTION 'could not serialize access (test)' USING ERRCODE = 'serialization_failure';
			END IF;
			RETURN NULL;
		END $$;
		CREATE TRIGGER test_fault AFTER INSERT ON usage_events FOR EACH STATEMENT EXECUTE FUNCTION test_fault();`); err != nil {
		t.Fatal(err)
	}
	e.publishAll(t, msgs)
	e.drain(t)

	if n := e.count(t, `SELECT count(*) FROM usage_events`); n != events {
		t.Errorf("%d usage rows, want %d", n, events)
	}
	if got := e.rejected(t); len(got) != 0 {
		t.Errorf("rejections %v: a fault of the database refused events", got)
	}
	e.wantBalances(t, events*charge(100, 10), events*payable(100, 10))
	if n := logs.count("not committed"); n != 2 {
		t.Errorf("%d retries, want the 2 the faults caused", n)
	}
	if n := logs.count("splitting"); n != 0 {
		t.Errorf("the batch was split %d times for a fault of the database", n)
	}
}
