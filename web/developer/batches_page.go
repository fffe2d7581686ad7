package developer

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/progress"
	"github.com/gpumarket/gpumarket/templates"
	"github.com/gpumarket/gpumarket/web/internal/core"
)

// The developer's /batches page (docs/batches.md): a form that uploads a file and starts a batch
// with one of the account's API keys, the account's batches with their progress and cost, a
// cancel button on each that is still running, and links to download their files. It calls the
// same service as /v1/files and /v1/batches, as the signed-in developer's account.

// maxPageUpload is the largest file the page takes: the site's body limit, which every form
// under a session has; the API takes files up to batch.MaxFileBytes.
const maxPageUpload = 1 << 20

func (s *Server) batchesPage(c echo.Context) error {
	return s.renderBatches(c, http.StatusOK, templates.Form{})
}

func (s *Server) renderBatches(c echo.Context, status int, form templates.Form) error {
	if s.batches == nil {
		return services.Errorf(services.CodeUnavailable, "Batches do not run in this process.")
	}
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	keys, err := s.Accounts.Keys(ctx, sess.User.AccountID)
	if err != nil {
		return err
	}
	page, err := s.batches.Batches(ctx, sess.User.AccountID, "", 100)
	if err != nil {
		return err
	}
	p := templates.BatchesPage{Page: s.Page(c, "Batches"), Form: form, MaxUploadBytes: "1 MB"}
	for _, k := range keys {
		if k.RevokedAt == nil {
			p.Keys = append(p.Keys, templates.Option{Value: k.ID, Label: k.Name + " (" + k.Prefix + "…)"})
		}
	}
	for _, e := range batch.Endpoints {
		p.Endpoints = append(p.Endpoints, templates.Option{Value: e, Label: e})
	}
	for _, b := range page.Data {
		r, err := s.batches.Reading(ctx, sess.User.AccountID, b)
		if err != nil {
			return err
		}
		if r.Running {
			p.Refresh = 5 // follow a batch under way without a script
		}
		p.Batches = append(p.Batches, batchRow(core.Zone(c), b, r))
	}
	return s.Render(c, status, templates.Batches(p))
}

// batchPage is one of the account's batches on a page of its own; another account's is not found.
func (s *Server) batchPage(c echo.Context) error {
	b, r, err := s.ownBatch(c)
	if err != nil {
		return err
	}
	p := templates.BatchDetailPage{Page: s.Page(c, "Batch "+b.ID), Batch: batchRow(core.Zone(c), b, r)}
	if r.Running {
		p.Refresh = 5 // follow the batch without a script
	}
	return s.Render(c, http.StatusOK, templates.BatchDetail(p))
}

// batchProgress is the progress block of one of the account's batches alone, which the page's
// script polls while the batch runs (docs/progress.md).
func (s *Server) batchProgress(c echo.Context) error {
	b, r, err := s.ownBatch(c)
	if err != nil {
		return err
	}
	return s.RenderProgress(c, batchProgressView(b, r))
}

// ownBatch is the batch the path names, of the account in use, with its lines' progress;
// another account's is not found.
func (s *Server) ownBatch(c echo.Context) (batch.Batch, progress.Reading, error) {
	if s.batches == nil {
		return batch.Batch{}, progress.Reading{}, services.Errorf(services.CodeUnavailable, "Batches do not run in this process.")
	}
	sess, _ := core.CurrentSession(c)
	return s.batches.Progress(c.Request().Context(), sess.User.AccountID, c.Param("id"))
}

// batchProgressView is a batch's lines as its progress block shows them.
func batchProgressView(b batch.Batch, r progress.Reading) templates.ProgressView {
	v := core.ProgressView(progress.Of(r), "lines", "/batches/"+b.ID+"/progress")
	v.TestID, v.Label, v.Status = "batch-lines", "Lines of "+b.ID+" done", strings.ReplaceAll(b.Status, "_", " ")
	v.Count = fmt.Sprintf("%d done, %d failed of %s", b.RequestCounts.Completed, b.RequestCounts.Failed,
		money.Counted(int64(b.RequestCounts.Total), "line", "lines"))
	return v
}

// usdPrecise writes a batch's cost as one request's cost is written: a batch of a few lines
// costs a fraction of a cent, which in cents would read as nothing. The exact figure is in the
// JSON (cost_usd).
func usdPrecise(usd string) string {
	p, err := money.ParseUSD(usd)
	if err != nil {
		return "$" + usd
	}
	return money.FormatPrecisePico(p)
}

func batchRow(loc *time.Location, b batch.Batch, r progress.Reading) templates.BatchRow {
	row := templates.BatchRow{ID: b.ID, Status: strings.ReplaceAll(b.Status, "_", " "), Endpoint: b.Endpoint,
		Created: core.MomentIn(loc, time.Unix(b.CreatedAt, 0), core.ToSecond), Cost: usdPrecise(b.GPUMarket.CostUSD),
		Estimate: usdPrecise(b.GPUMarket.EstimateUSD), InputID: b.InputFileID,
		Cancellable: b.Status == batch.StatusValidating || b.Status == batch.StatusInProgress, Progress: batchProgressView(b, r)}
	if b.OutputFileID != nil {
		row.OutputID = *b.OutputFileID
	}
	if b.ErrorFileID != nil {
		row.ErrorID = *b.ErrorFileID
	}
	if b.Errors != nil {
		for _, e := range b.Errors.Data {
			row.Errors = append(row.Errors, e.Message)
		}
	}
	return row
}

// createBatchSubmit uploads the form's file and starts a batch of it with the chosen key.
func (s *Server) createBatchSubmit(c echo.Context) error {
	if s.batches == nil {
		return services.Errorf(services.CodeUnavailable, "Batches do not run in this process.")
	}
	sess, _ := core.CurrentSession(c)
	ctx := c.Request().Context()
	values := core.Submitted(c, "endpoint", "key")
	fail := func(err error) error {
		return s.FormError(c, err, func(f templates.Form) error {
			f.Values = values
			return s.renderBatches(c, core.StatusFor(err), f)
		})
	}
	keyID := c.FormValue("key")
	keys, err := s.Accounts.Keys(ctx, sess.User.AccountID)
	if err != nil {
		return err
	}
	live := false
	for _, k := range keys {
		live = live || (k.ID == keyID && k.RevokedAt == nil)
	}
	if !live {
		return fail(core.FieldError("key", "Choose one of your live API keys."))
	}
	fh, err := c.FormFile("file")
	if errors.Is(err, http.ErrMissingFile) || (err == nil && fh.Size == 0) {
		return fail(core.FieldError("file", "Choose a JSONL file of requests."))
	}
	if err != nil {
		return fail(core.FieldError("file", fmt.Sprintf("The file could not be read; files over %d bytes go through POST /v1/files.", maxPageUpload)))
	}
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	staged, err := s.batches.Stage(sess.User.AccountID, fh.Filename, f)
	if err != nil {
		return fail(asFieldError("file", err))
	}
	file, err := s.batches.Commit(ctx, staged, batch.PurposeBatch)
	if err != nil {
		return fail(asFieldError("file", err))
	}
	if _, err := s.batches.Create(ctx, batch.CreateInput{AccountID: sess.User.AccountID, APIKeyID: keyID, InputFileID: file.ID,
		Endpoint: c.FormValue("endpoint"), CompletionWindow: batch.CompletionWindow}); err != nil {
		return fail(err)
	}
	return c.Redirect(http.StatusSeeOther, "/batches?flash=batch-started")
}

// asFieldError puts an invalid-input error's message on a field.
func asFieldError(field string, err error) error {
	var ae *services.Error
	if services.ErrorCode(err) == services.CodeInvalid && errors.As(err, &ae) && len(ae.Fields) == 0 {
		return core.FieldError(field, ae.Message)
	}
	return err
}

func (s *Server) cancelBatchSubmit(c echo.Context) error {
	if s.batches == nil {
		return services.Errorf(services.CodeUnavailable, "Batches do not run in this process.")
	}
	sess, _ := core.CurrentSession(c)
	if _, err := s.batches.Cancel(c.Request().Context(), sess.User.AccountID, c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/batches?flash=batch-cancelling")
}

// batchFileDownload sends one of the account's batch files as an attachment.
func (s *Server) batchFileDownload(c echo.Context) error {
	if s.batches == nil {
		return services.Errorf(services.CodeUnavailable, "Batches do not run in this process.")
	}
	sess, _ := core.CurrentSession(c)
	f, r, err := s.batches.Content(c.Request().Context(), sess.User.AccountID, c.Param("id"))
	if err != nil {
		return err
	}
	defer r.Close()
	h := c.Response().Header()
	h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.Filename))
	h.Set("Content-Length", fmt.Sprint(f.Bytes))
	return c.Stream(http.StatusOK, "application/jsonl", r)
}
