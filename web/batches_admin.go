package web

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/templates"
)

// The batch queue for admins (docs/batches.md, "The queue"): GET /admin/batches and GET
// /api/admin/batches. The queue's figures are the database's (batch.Service.Queue); the batch
// lines in flight on each offering are this process's gateway's, beside the capacity the
// offering's last heartbeat to this process reported.

// batchLoad counts the batch lines this gateway has in flight on each offering: the gateway
// sends every line, so it alone knows which rig a line is on while it runs.
type batchLoad struct {
	mu sync.Mutex
	n  map[string]int
}

// begin counts a batch line in flight on the offering until end is called (again does nothing).
func (b *batchLoad) begin(offeringID string) (end func()) {
	b.mu.Lock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[offeringID]++
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.n[offeringID]--; b.n[offeringID] <= 0 {
				delete(b.n, offeringID)
			}
		})
	}
}

func (b *batchLoad) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.n))
	for id, n := range b.n {
		out[id] = n
	}
	return out
}

// batchOffering is an offering serving batch lines now: the lines in flight on it from this
// process and the requests its rig serves at once by its last heartbeat (0: none heard).
type batchOffering struct {
	OfferingID string `json:"offering_id"`
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Tier       string `json:"tier"`
	InFlight   int    `json:"batch_lines_in_flight"`
	Capacity   int    `json:"capacity"`
}

// batchQueueJSON is GET /api/admin/batches.
type batchQueueJSON struct {
	batch.Queue
	Offerings []batchOffering `json:"offerings"`
}

var errNoBatches = services.Errorf(services.CodeUnavailable, "The Batch API does not run in this process.")

func (s *Server) batchQueue(ctx context.Context) (batchQueueJSON, error) {
	if s.batches == nil {
		return batchQueueJSON{}, errNoBatches
	}
	q, err := s.batches.Queue(ctx)
	if err != nil {
		return batchQueueJSON{}, err
	}
	out := batchQueueJSON{Queue: q, Offerings: []batchOffering{}}
	for id, n := range s.gw.batchLoad.snapshot() {
		o := batchOffering{OfferingID: id, InFlight: n}
		if s.gw.cfg.Router != nil {
			o.Capacity = s.gw.cfg.Router.Capacity(id)
		}
		if off, err := s.catalog.Get(ctx, id); err == nil {
			o.Provider, o.Model, o.Tier = off.ProviderName, off.Model, string(off.Tier)
		}
		out.Offerings = append(out.Offerings, o)
	}
	sort.Slice(out.Offerings, func(i, j int) bool { return out.Offerings[i].OfferingID < out.Offerings[j].OfferingID })
	return out, nil
}

func (s *Server) apiBatchQueue(c echo.Context) error {
	q, err := s.batchQueue(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, q)
}

func (s *Server) batchQueuePage(c echo.Context) error {
	q, err := s.batchQueue(c.Request().Context())
	if err != nil {
		return err
	}
	p := templates.BatchQueuePage{Page: s.page(c, "Batch queue"), Pending: q.Lines.Pending, Running: q.Lines.Running,
		Done: q.Lines.Done, Failed: q.Lines.Failed, LinesLastHour: q.LinesLastHour,
		PerMinute: strconv.FormatFloat(q.LinesPerMinute, 'f', 1, 64), Oldest: "none pending"}
	for _, st := range []string{batch.StatusValidating, batch.StatusInProgress, batch.StatusFinalizing, batch.StatusCancelling} {
		p.Batches = append(p.Batches, templates.BatchStatusCount{Status: st, Count: q.Batches[st]})
	}
	if q.OldestPendingAgeSeconds != nil {
		p.Oldest = (time.Duration(*q.OldestPendingAgeSeconds) * time.Second).String()
	}
	for _, o := range q.Offerings {
		capacity := "unknown"
		if o.Capacity > 0 {
			capacity = strconv.Itoa(o.Capacity)
		}
		p.Offerings = append(p.Offerings, templates.BatchOfferingRow{OfferingID: o.OfferingID, Provider: o.Provider,
			Model: o.Model, Tier: o.Tier, InFlight: o.InFlight, Capacity: capacity})
	}
	return s.render(c, http.StatusOK, templates.BatchQueue(p))
}
