// Package s3fake serves the S3 protocol in a test's process, for tests of the batch files' S3
// store (docs/batches.md, "The S3 store"): gofakes3 over memory, behind an httptest server.
package s3fake

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Start serves an S3 store with the bucket made, until the test ends, and returns its URL.
func Start(t testing.TB, bucket string) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(decodeChunkedParts(gofakes3.New(backend).Server()))
	t.Cleanup(srv.Close)
	return srv.URL
}

// decodeChunkedParts undoes the aws-chunked encoding of a part's body, which S3 clients use over
// plain HTTP (each chunk signed) and which gofakes3 decodes for a whole object's PUT but not for
// a part's.
func decodeChunkedParts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") &&
			strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-") {
			body, err := unchunk(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
			r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}
		next.ServeHTTP(w, r)
	})
}

// unchunk reads chunks of "<hex size>;chunk-signature=<sig>\r\n<data>\r\n" up to the empty one.
func unchunk(r io.Reader) ([]byte, error) {
	br := bufio.NewReader(r)
	var out bytes.Buffer
	for {
		header, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("aws-chunked body: %w", err)
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(header), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("aws-chunked body: chunk size %q", sizeHex)
		}
		if n == 0 {
			return out.Bytes(), nil
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return nil, fmt.Errorf("aws-chunked body: %w", err)
		}
		if _, err := br.Discard(2); err != nil {
			return nil, fmt.Errorf("aws-chunked body: %w", err)
		}
	}
}
