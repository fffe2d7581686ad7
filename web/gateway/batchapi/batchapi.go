// Package batchapi serves the OpenAI Batch API's files and batches under /v1 (docs/batches.md): POST, GET and
// DELETE /v1/files, GET /v1/files/{id}/content, POST and GET /v1/batches, GET /v1/batches/{id} and POST
// /v1/batches/{id}/cancel, over package batch. Every call sees only its key's account: another account's file or
// batch is 404. The gateway (package gateway), its only importer, registers the routes (API.Routes) and lends its
// API keys, its body reader and its errors, so that the Batch API takes the keys and answers in the error shape
// of the inference endpoints. It imports none of the gateway's packages but internal/wire.
package batchapi

import (
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

// API is the Batch API's handlers.
type API struct {
	// Batches is the batch service; nil answers every call with 503.
	Batches *batch.Service
	// Admit authenticates a call by its API key, as every /v1 request is.
	Admit func(echo.Context) (accounts.APIKey, error)
	// ReadBody reads a request's body, refusing more than limit bytes.
	ReadBody func(c echo.Context, limit int64) ([]byte, error)
	// WriteError answers an error in OpenAI's shape.
	WriteError func(echo.Context, error) error
}

// Routes registers the Batch API's endpoints on e, beside the inference endpoints.
func (a *API) Routes(e *echo.Echo) {
	e.POST("/v1/files", a.uploadFile)
	e.GET("/v1/files", a.listFiles)
	e.GET("/v1/files/:id", a.getFile)
	e.GET("/v1/files/:id/content", a.fileContent)
	e.DELETE("/v1/files/:id", a.deleteFile)
	e.POST("/v1/batches", a.createBatch)
	e.GET("/v1/batches", a.listBatches)
	e.GET("/v1/batches/:id", a.getBatch)
	e.POST("/v1/batches/:id/cancel", a.cancelBatch)
}

// batchError answers a Batch API error in OpenAI's shape.
func (a *API) batchError(c echo.Context, err error) error {
	var ae *services.Error
	msg := ""
	if errors.As(err, &ae) {
		msg = ae.Message
	}
	switch code := services.ErrorCode(err); code {
	case services.CodeNotFound, services.CodeConflict:
		err = wire.New(code, "", "", msg)
	}
	return a.WriteError(c, err)
}

// batchCaller authenticates a Batch API call; with no batch service it answers 503.
func (a *API) batchCaller(c echo.Context) (accounts.APIKey, error) {
	key, err := a.Admit(c)
	if err != nil {
		return accounts.APIKey{}, err
	}
	if a.Batches == nil {
		return accounts.APIKey{}, services.Errorf(services.CodeUnavailable, "The Batch API does not run in this process.")
	}
	return key, nil
}

// uploadFile takes a multipart upload (file, purpose=batch) and streams the file to storage.
func (a *API) uploadFile(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	// An upload of 200 MB outlasts the server's read timeout; it is bounded by its size instead.
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Now().Add(30 * time.Minute))
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return a.batchError(c, wire.InvalidRequest("file", "", "Send the file as multipart/form-data with the fields file and purpose."))
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
			return a.batchError(c, wire.InvalidRequest("file", "", "The multipart body could not be read."))
		}
		switch part.FormName() {
		case "file":
			if staged != nil {
				return a.batchError(c, wire.InvalidRequest("file", "", "Send one file."))
			}
			if staged, err = a.Batches.Stage(key.AccountID, part.FileName(), part); err != nil {
				return a.batchError(c, err)
			}
		case "purpose":
			raw, _ := io.ReadAll(io.LimitReader(part, 64))
			purpose = strings.TrimSpace(string(raw))
		}
		part.Close()
	}
	if staged == nil {
		return a.batchError(c, wire.InvalidRequest("file", "", "The form has no file."))
	}
	f, err := a.Batches.Commit(c.Request().Context(), staged, purpose)
	staged = nil // committed or thrown away
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, f)
}

func (a *API) listFiles(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	p, err := a.Batches.Files(c.Request().Context(), key.AccountID, batch.FileQuery{Purpose: c.QueryParam("purpose"),
		After: c.QueryParam("after"), Order: c.QueryParam("order"), Limit: limit})
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

func (a *API) getFile(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	f, err := a.Batches.File(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, f)
}

// fileContent streams a file as stored.
func (a *API) fileContent(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	f, r, err := a.Batches.Content(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return a.batchError(c, err)
	}
	defer r.Close()
	rc := http.NewResponseController(c.Response())
	_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Minute))
	c.Response().Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	return c.Stream(http.StatusOK, "application/octet-stream", r)
}

func (a *API) deleteFile(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	id := c.Param("id")
	if err := a.Batches.DeleteFile(c.Request().Context(), key.AccountID, id); err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"id": id, "object": "file", "deleted": true})
}

func (a *API) createBatch(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	body, err := a.ReadBody(c, 64<<10)
	if err != nil {
		return a.batchError(c, err)
	}
	var in batch.CreateInput
	if err := json.Unmarshal(body, &in); err != nil {
		return a.batchError(c, wire.InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request."))
	}
	in.AccountID, in.APIKeyID = key.AccountID, key.ID
	b, err := a.Batches.Create(c.Request().Context(), in)
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}

func (a *API) getBatch(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	b, err := a.Batches.Batch(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}

func (a *API) listBatches(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	limit, _ := strconv.Atoi(c.QueryParam("limit"))
	p, err := a.Batches.Batches(c.Request().Context(), key.AccountID, c.QueryParam("after"), limit)
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, p)
}

func (a *API) cancelBatch(c echo.Context) error {
	key, err := a.batchCaller(c)
	if err != nil {
		return a.batchError(c, err)
	}
	b, err := a.Batches.Cancel(c.Request().Context(), key.AccountID, c.Param("id"))
	if err != nil {
		return a.batchError(c, err)
	}
	return c.JSON(http.StatusOK, b)
}
