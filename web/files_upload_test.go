package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/testlog"
	"github.com/gpumarket/gpumarket/web"
)

// uploadEnv is a server whose log the test reads, and a developer's API key for /v1/files.
func uploadEnv(t *testing.T) (e *env, secret string, log *testlog.Buffer) {
	t.Helper()
	logger, buf := testlog.New(t)
	e = setupWith(t, func(cfg *web.Config, _ *pgxpool.Pool) { cfg.Log = logger })
	ctx := context.Background()
	dev, err := e.accounts.UserByEmail(ctx, "developer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err = e.accounts.CreateKey(ctx, dev, accounts.NewKeyInput{Name: "batch uploads"})
	if err != nil {
		t.Fatal(err)
	}
	return e, secret, buf
}

// multipartUpload is a form with the fields purpose=batch and file, the file under filename.
func multipartUpload(t *testing.T, filename, content string) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.WriteField("purpose", "batch"); err != nil {
		t.Fatal(err)
	}
	fw, err := w.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(fw, content); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// postFile sends a body to POST /v1/files and returns the status and the decoded answer.
func postFile(t *testing.T, e *env, secret string, body []byte, contentType string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/files", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	return res.StatusCode, out
}

const uploadLine = `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}` + "\n"

// A multipart upload cut off in the middle of its file, before the form's closing boundary, is
// the caller's fault: 400 with an error saying so, nothing logged as an internal error, and no
// file listed.
func TestTruncatedUploadIs400(t *testing.T) {
	t.Parallel()
	e, secret, log := uploadEnv(t)
	body, ct := multipartUpload(t, "in.jsonl", strings.Repeat(uploadLine, 20))
	cut := bytes.Index(body, []byte(uploadLine)) + 5*len(uploadLine) + 17 // mid-line of the sixth line
	status, out := postFile(t, e, secret, body[:cut], ct)
	if status != http.StatusBadRequest {
		t.Fatalf("status %d (%v), want 400", status, out)
	}
	msg, _ := out["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "cut off after 437 bytes") {
		t.Fatalf("message %q, want it to say the upload was cut off after 437 bytes", msg)
	}
	if typ := out["error"].(map[string]any)["type"]; typ != "invalid_request_error" {
		t.Fatalf("error type %v", typ)
	}
	if strings.Contains(log.String(), "level=ERROR") {
		t.Fatalf("a cut-off upload was logged as an error:\n%s", log)
	}
	// The whole body is taken.
	status, out = postFile(t, e, secret, body, ct)
	if status != http.StatusOK || out["bytes"] != float64(20*len(uploadLine)) {
		t.Fatalf("the whole upload: status %d, %v", status, out)
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM batch_files`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d files stored (%v), want the whole one only", n, err)
	}
}

// A file uploaded under a name with a right-to-left override is listed without it.
func TestUploadedFileNameLosesBidiOverrides(t *testing.T) {
	t.Parallel()
	e, secret, _ := uploadEnv(t)
	body, ct := multipartUpload(t, "requests\u202Elnosj.exe", uploadLine)
	status, out := postFile(t, e, secret, body, ct)
	if status != http.StatusOK || out["filename"] != "requestslnosj.exe" {
		t.Fatalf("status %d, filename %q, want requestslnosj.exe", status, out["filename"])
	}
	var stored string
	if err := e.pool.QueryRow(context.Background(), `SELECT filename FROM batch_files`).Scan(&stored); err != nil || stored != "requestslnosj.exe" {
		t.Fatalf("stored %q (%v)", stored, err)
	}
}
