// Package httpx holds what the platform's HTTP handlers share, the pages' and the /v1 gateway's alike:
// responses that outlive the server's timeouts (DeadlineWriter) and the bearer token of a request.
package httpx

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// The platform's server bounds every response by its read and write timeouts (see
// docs/web-security.md, "Timeouts"). A response that may rightly outlive them, such as a long
// export, extends its own connection's deadlines as it goes, through http.ResponseController,
// for as long as it keeps writing: a client that stops reading still times out.
//
// Both deadlines matter: once a request's body is read, net/http watches the connection with a
// background read, and when the read deadline passes that read fails and cancels the
// request's context, even while the handler is still writing.

// ExportWindow is how long an export may go without writing before its connection times out.
const ExportWindow = 30 * time.Second

// extendDeadlines moves the connection's read and write deadlines to until. Writers that do
// not support deadlines (a test's recorder) are left as they are.
func extendDeadlines(w http.ResponseWriter, until time.Time) error {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(until); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := rc.SetReadDeadline(until); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// DeadlineWriter writes to a response and, at most once a second, moves the connection's
// deadlines to window from now.
type DeadlineWriter struct {
	w        http.ResponseWriter
	window   time.Duration
	extended time.Time
}

var _ io.Writer = (*DeadlineWriter)(nil)

// NewDeadlineWriter returns a writer to w whose connection's deadlines are window from now,
// and are moved on as it writes.
func NewDeadlineWriter(w http.ResponseWriter, window time.Duration) (*DeadlineWriter, error) {
	d := &DeadlineWriter{w: w, window: window}
	return d, d.extend(time.Now())
}

func (d *DeadlineWriter) extend(now time.Time) error {
	if now.Sub(d.extended) < time.Second {
		return nil
	}
	d.extended = now
	return extendDeadlines(d.w, now.Add(d.window))
}

func (d *DeadlineWriter) Write(p []byte) (int, error) {
	if err := d.extend(time.Now()); err != nil {
		return 0, err
	}
	return d.w.Write(p)
}

// Flush sends what was written so far to the client.
func (d *DeadlineWriter) Flush() error { return http.NewResponseController(d.w).Flush() }

// BearerToken is the token of the request's Authorization: Bearer header, "" without one.
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
