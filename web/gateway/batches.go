package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
)

// The OpenAI Batch API under /v1 (docs/batches.md): files (POST, GET, DELETE /v1/files, GET
// /v1/files/{id}/content) and batches (POST, GET /v1/batches, GET /v1/batches/{id}, POST
// /v1/batches/{id}/cancel), with the same API keys and the same error shape as the inference
// endpoints. Every call sees only its key's account: another account's file or batch is 404.
//
// The scheduler (package batch) sends each line through the very handlers interactive requests
// go through, in process (Send): the key's account and API key ride in the request's context,
// which no client can set, and the gateway then takes them instead of a bearer token, forces the
// batch tier and names its attempts after the line, so that tickets, admission, the meter and the
// usage page are the ones every request has.

// batchLine is what a batch's line carries through the gateway in its request's context.
type batchLine struct {
	accountID, apiKeyID string
	requestIDPrefix     string
}

type batchLineKey struct{}

func batchLineOf(ctx context.Context) *batchLine {
	l, _ := ctx.Value(batchLineKey{}).(*batchLine)
	return l
}

// batchKey is the live API key a batch was created with, cached as keys by secret are (and
// forgotten with them when a key changes), in a cache of its own: no bearer token can name an
// entry of it.
func (g *Gateway) batchKey(ctx context.Context, line *batchLine) (accounts.APIKey, error) {
	return g.batchKeys.lookup(ctx, line.accountID+"/"+line.apiKeyID, g.now(), func(ctx context.Context, _ string) (accounts.APIKey, error) {
		keys, err := g.accounts.Keys(ctx, line.accountID)
		if err != nil {
			return accounts.APIKey{}, err
		}
		for _, k := range keys {
			if k.ID == line.apiKeyID && k.RevokedAt == nil {
				return k, nil
			}
		}
		return accounts.APIKey{}, services.Errorf(services.CodeUnauthorized, "The batch's API key was revoked.")
	})
}

// attemptID is the request id of an attempt at the i-th candidate: a batch line's is made from
// its line and attempt (batch.AttemptRequestID), any other's is new.
func (g *Gateway) attemptID(ctx context.Context, i int) string {
	if line := batchLineOf(ctx); line != nil {
		return batch.AttemptRequestID(line.requestIDPrefix, i)
	}
	return g.cfg.NewRequestID()
}

var _ batch.Gateway = (*Gateway)(nil)

// Send runs a batch's line through the gateway in process and returns its answer.
func (g *Gateway) Send(ctx context.Context, call batch.Call) (batch.Answer, error) {
	ctx = context.WithValue(ctx, batchLineKey{}, &batchLine{accountID: call.AccountID, apiKeyID: call.APIKeyID,
		requestIDPrefix: call.RequestIDPrefix})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(call.Body))
	if err != nil {
		return batch.Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = "127.0.0.1:0"
	rec := &lineRecorder{header: http.Header{}}
	g.echo.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return batch.Answer{StatusCode: rec.status, Body: rec.body.Bytes(), RequestID: rec.header.Get("X-GPUMarket-Request-Id")}, nil
}

// lineRecorder keeps a line's answer.
type lineRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *lineRecorder) Header() http.Header { return r.header }
func (r *lineRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *lineRecorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}
func (r *lineRecorder) Flush() {}

// batchRoutes registers the Batch API's endpoints beside the inference endpoints.
func (g *Gateway) batchRoutes() {
	e := g.echo
	e.POST("/v1/files", g.uploadFile)
	e.GET("/v1/files", g.listFiles)
	e.GET("/v1/files/:id", g.getFile)
	e.GET("/v1/files/:id/content", g.fileContent)
	e.DELETE("/v1/files/:id", g.deleteFile)
	e.POST("/v1/batches", g.createBatch)
	e.GET("/v1/batches", g.listBatches)
	e.GET("/v1/batches/:id", g.getBatch)
	e.POST("/v1/batches/:id/cancel", g.cancelBatch)
}

// batchError answers a Batch API error in OpenAI's shape.
func (g *Gateway) batchError(c echo.Context, err error) error {
	var ae *services.Error
	msg := ""
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	switch services.ErrorCode(err) {
	case services.CodeNotFound:
		err = &wire.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Message: msg}
	case services.CodeConflict:
		err = &wire.Error{Status: http.StatusConflict, Type: "invalid_request_error", Message: msg}
	}
	return g.writeGatewayError(c, err)
}

// batchCaller authenticates a Batch API call; with no batch service it answers 503.
func (g *Gateway) batchCaller(c echo.Context) (accounts.APIKey, error) {
	key, err := g.admitKey(c)
	if err != nil {
		return accounts.APIKey{}, err
	}
	if g.batches == nil {
		return accounts.APIKey{}, services.Errorf(services.CodeUnavailable, "The Batch API does not run in this process.")
	}
	return key, nil
}

// uploadFile takes a multipart upload (file, purpose=batch) and streams the file to storage.
func (g *Gateway) uploadFile(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	// An upload of 200 MB outlasts the server's read timeout; it is bounded by its size instead.
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Now().Add(30 * time.Minute))
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return g.batchError(c, wire.InvalidRequest("file", "", "Send the file as multipart/form-data with the fields file and purpose."))
	}
	var staged *batch.Staged
	purpose := ""
	defer func() {
		if staged != nil {
			staged.Abort()
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return g.batchError(c, wire.InvalidRequest("file", "", "The multipart body could not be read."))
		}
		switch part.FormName() {
		case "file":
			if staged != nil {
				return g.batchError(c, wire.InvalidRequest("file", "", "Send one file."))
			}
			if staged, err = g.batches.Stage(key.AccountID, part.FileName(), part); err != nil {
				return g.batchError(c, err)
			}
		case "purpose":
			raw, _ := io.ReadAll(io.LimitReader(part, 64))
			purpose = strings.TrimSpace(string(raw))
		}
		part.Close()
	}
	if staged == nil {
		return g.batchError(c, wire.InvalidRequest("file", "", "The form has no file."))
	}
	f, err := g.batches.Commit(c.Request().Context(), staged, purpose)
	staged = nil // committed or thrown away
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, f)
}

func (g *Gateway) listFiles(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	p, err := g.batches.Files(c.Request().Context(), key.AccountID, batch.FileQuery{Purpose: c.QueryParam("purpose"),
		After: c.QueryParam("after"), Order: c.QueryParam("order"), Limit: limit})
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

func (g *Gateway) getFile(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	f, err := g.batches.File(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, f)
}

// fileContent streams a file as stored.
func (g *Gateway) fileContent(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	f, r, err := g.batches.Content(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return g.batchError(c, err)
	}
	defer r.Close()
	rc := http.NewResponseController(c.Response())
	_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Minute))
	c.Response().Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	return c.Stream(http.StatusOK, "application/octet-stream", r)
}

func (g *Gateway) deleteFile(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	id := c.Param("id")
	if err := g.batches.DeleteFile(c.Request().Context(), key.AccountID, id); err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"id": id, "object": "file", "deleted": true})
}

func (g *Gateway) createBatch(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	body, err := readGatewayBody(c, 64<<10)
	if err != nil {
		return g.batchError(c, err)
	}
	var in batch.CreateInput
	if err := json.Unmarshal(body, &in); err != nil {
		return g.batchError(c, wire.InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request."))
	}
	in.AccountID, in.APIKeyID = key.AccountID, key.ID
	b, err := g.batches.Create(c.Request().Context(), in)
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}

func (g *Gateway) getBatch(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	b, err := g.batches.Batch(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}

func (g *Gateway) listBatches(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	p, err := g.batches.Batches(c.Request().Context(), key.AccountID, c.QueryParam("after"), limit)
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

func (g *Gateway) cancelBatch(c echo.Context) error {
	key, err := g.batchCaller(c)
	if err != nil {
		return g.batchError(c, err)
	}
	b, err := g.batches.Cancel(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return g.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}
