package gateway

import (
	"bytes"
	"context"
	"net/http"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
)

// The OpenAI Batch API's lines (docs/batches.md); its files and batches are package batchapi's.
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
	return g.batchKeys.Lookup(ctx, line.accountID+"/"+line.apiKeyID, g.now(), func(ctx context.Context, _ string) (accounts.APIKey, error) {
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
