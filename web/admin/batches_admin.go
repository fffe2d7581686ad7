package admin

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/progress"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The batch queue for admins (docs/batches.md, "The queue"): GET /admin/batches and GET
// /api/admin/batches. The queue's figures are the database's (batch.Service.Queue); the batch
// lines in flight on each offering are this process's gateway's (Config.BatchLoad), beside the
// capacity the offering's last heartbeat to this process reported (Config.Router).

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
	var load map[string]int
	if s.batchLoad != nil {
		load = s.batchLoad()
	}
	for id, n := range load {
		o := batchOffering{OfferingID: id, InFlight: n}
		if s.router != nil {
			o.Capacity = s.router.Capacity(id)
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
	p := templates.BatchQueuePage{Page: s.Page(c, "Batch queue"), Pending: q.Lines.Pending, Running: q.Lines.Running,
		Done: q.Lines.Done, Failed: q.Lines.Failed, LinesLastHour: q.LinesLastHour,
		PerMinute: strconv.FormatFloat(q.LinesPerMinute, 'f', 1, 64), Oldest: "none pending"}
	if p.Progress, err = s.queueProgress(c.Request().Context()); err != nil {
		return err
	}
	if p.Progress.Src != "" {
		p.Refresh = 10 // follow the queue without a script
	}
	for _, st := range []string{batch.StatusValidating, batch.StatusInProgress, batch.StatusFinalizing, batch.StatusCancelling} {
		p.Batches = append(p.Batches, templates.BatchStatusCount{Status: st, Count: q.Batches[st]})
	}
	if q.OldestPendingAgeSeconds != nil {
		p.Oldest = (time.Duration(*q.OldestPendingAgeSeconds) * time.Second).String()
	}
	ids := make([]string, 0, len(q.Offerings))
	for _, o := range q.Offerings {
		ids = append(ids, o.OfferingID)
	}
	labels, err := s.offeringLabels(c, ids)
	if err != nil {
		return err
	}
	for _, o := range q.Offerings {
		capacity := "unknown"
		if o.Capacity > 0 {
			capacity = strconv.Itoa(o.Capacity)
		}
		p.Offerings = append(p.Offerings, templates.BatchOfferingRow{OfferingID: o.OfferingID, Offering: labelOr(labels, o.OfferingID), Provider: o.Provider,
			Model: o.Model, Tier: o.Tier, InFlight: o.InFlight, Capacity: capacity})
	}
	return s.Render(c, http.StatusOK, templates.BatchQueue(p))
}

// queueProgress is the lines of every batch in progress as the queue's progress block shows
// them (docs/progress.md).
func (s *Server) queueProgress(ctx context.Context) (templates.ProgressView, error) {
	if s.batches == nil {
		return templates.ProgressView{}, errNoBatches
	}
	r, err := s.batches.QueueProgress(ctx)
	if err != nil {
		return templates.ProgressView{}, err
	}
	v := core.ProgressView(progress.Of(r), "lines", "/admin/batches/progress")
	v.TestID, v.Label = "queue-progress", "Lines of the batches in progress done"
	if !r.Running {
		v.Status, v.Left = "no batch in progress", "nothing left"
	}
	return v, nil
}

// batchQueueProgress is the queue's progress block alone, which the page's script polls.
func (s *Server) batchQueueProgress(c echo.Context) error {
	v, err := s.queueProgress(c.Request().Context())
	if err != nil {
		return err
	}
	return s.RenderProgress(c, v)
}
