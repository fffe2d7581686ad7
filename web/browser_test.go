package web_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/web/webtest"
)

// Browser tests drive a real headless Chromium through the pages, as a user would. They
// need Debian's chromium: `make test` and .ci/run install it (apt-get install chromium).

const (
	browserTestTimeout = 60 * time.Second // the whole browser part of one test
	browserStepTimeout = 15 * time.Second // one step: a page load, a click, a query
)

// browser is one tab of a headless Chromium that belongs to one test. Its methods fail the
// test, with the page's address and text in the log, when a step does not work.
type browser struct {
	t    *testing.T
	ctx  context.Context // the tab; its deadline is the test's browser deadline
	base string          // the site's URL, e.g. e.srv.URL
}

// newBrowser starts a fresh Chromium, with a profile of its own, for a site at baseURL. The
// browser stops, and its profile is removed, when the test ends.
func newBrowser(t *testing.T, baseURL string) *browser {
	t.Helper()
	deadline, cancelDeadline := context.WithTimeout(context.Background(), browserTestTimeout)
	t.Cleanup(cancelDeadline)
	tab := webtest.StartChromium(t, deadline)
	b := &browser{t: t, ctx: tab, base: strings.TrimRight(baseURL, "/")}
	// Runs before the tab closes (cleanups run last-in first-out): show where a failed
	// test left the browser.
	t.Cleanup(func() {
		if t.Failed() {
			b.logPage()
		}
	})
	return b
}

// step runs f with a step deadline and fails the test with what and the page when it errs.
func (b *browser) step(what string, f func(ctx context.Context) error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserStepTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (step limit %v, test limit %v)", err, browserStepTimeout, browserTestTimeout)
		}
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// do runs actions that return nothing.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.step(what, func(ctx context.Context) error { return chromedp.Do(ctx, actions...) })
}

// browserRun runs one action and returns its value.
func browserRun[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	var v T
	b.step(what, func(ctx context.Context) (err error) {
		v, err = chromedp.Run(ctx, a)
		return err
	})
	return v
}

// open loads a page of the site, by path, and returns the HTTP status of the document.
func (b *browser) open(path string) int64 {
	b.t.Helper()
	var status int64
	b.step("open "+path, func(ctx context.Context) error {
		res, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.base+path))
		if err == nil && res != nil {
			status = res.Status
		}
		return err
	})
	return status
}

// navigate runs actions that lead to a new page, such as a click on a link or a submit
// button, waits for that page to load, and returns the HTTP status of its document (the
// last one, after redirects).
func (b *browser) navigate(what string, actions ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	var status int64
	b.step(what, func(ctx context.Context) error {
		res, err := chromedp.RunResponse(ctx, actions...)
		if err == nil && res != nil {
			status = res.Status
		}
		return err
	})
	return status
}

// path is the path (with the query) of the page the tab shows.
func (b *browser) path() string {
	b.t.Helper()
	return strings.TrimPrefix(browserRun(b, "read location", chromedp.Location()), b.base)
}

// text is the visible text of the first element that sel matches, trimmed. It waits for
// the element, up to the step limit.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(browserRun(b, "read text of "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible)))
}

// count is how many elements sel matches now, without waiting.
func (b *browser) count(sel string) int {
	b.t.Helper()
	return browserRun(b, "count "+sel, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
}

// click clicks the first element that sel matches, once it is visible.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
}

// fill types value into the text input that sel matches, replacing what it held.
func fill(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Clear(chromedp.CSS(sel)), chromedp.SendKeys(chromedp.CSS(sel), value))
}

// choose picks the option with value in the select that sel matches.
func choose(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.SetValue(chromedp.CSS(sel), value)
}

// logPage writes where the tab is and what it shows into the test log.
func (b *browser) logPage() {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Logf("browser: the page is unreadable: %v", err)
		return
	}
	body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(body) > 4000 {
		body = body[:4000] + "…"
	}
	b.t.Logf("browser was at %s, showing:\n%s", loc, body)
}

// testID is the CSS selector of elements with that data-testid.
func testID(id string) string { return fmt.Sprintf("[data-testid=%q]", id) }
