package httpx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A response that writes for longer than the server's read and write timeouts: with its
// deadlines extended as it writes it arrives whole; without, the connection is cut.
func TestDeadlineWriterOutlivesTheServerTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	const chunks, every = 15, 100 * time.Millisecond // 1.5 s of writing
	serve := func(extend bool) (string, error) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var out io.Writer = w
			if extend {
				d, err := NewDeadlineWriter(w, time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				out = d
			}
			for i := range chunks {
				if _, err := io.WriteString(out, strings.Repeat("x", 1000)+"\n"); err != nil {
					return
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					return
				}
				if i < chunks-1 {
					time.Sleep(every)
				}
			}
		}))
		srv.Config.ReadTimeout, srv.Config.WriteTimeout = timeout, timeout
		srv.Start()
		defer srv.Close()
		res, err := http.Get(srv.URL + "/export.csv")
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		return string(body), err
	}
	body, err := serve(true)
	if err != nil || strings.Count(body, "\n") != chunks {
		t.Fatalf("with its deadlines extended: %d of %d lines, %v", strings.Count(body, "\n"), chunks, err)
	}
	body, err = serve(false)
	if err == nil && strings.Count(body, "\n") == chunks {
		t.Fatalf("without extending its deadlines a %v response outlived %v timeouts: the test proves nothing", chunks*every, timeout)
	}
	t.Logf("without extending: %d of %d lines, then %v", strings.Count(body, "\n"), chunks, err)
}
