// Package webtest starts the headless Chromium that browser tests drive, for the web
// package's tests and for the platform's end-to-end tests alike.
package webtest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds the browser: $CHROMIUM_BIN, else /usr/bin/chromium, else chromium on the
// PATH. It fails the test when there is none: a browser test never skips silently.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium: left out of the short run; make test runs it")
	}
	if p := os.Getenv("CHROMIUM_BIN"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("CHROMIUM_BIN=%q is not an executable (%v): unset it to use Debian's chromium, "+
				"which `make test` and .ci/run install (apt-get install chromium)", p, err)
		}
		return p
	}
	if _, err := exec.LookPath("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("no Chromium for the browser tests: run them with `make test` or .ci/run, which install it " +
		"(apt-get install chromium), or set CHROMIUM_BIN to a Chromium or Chrome binary")
	return ""
}

// StartChromium starts a fresh headless Chromium, with a profile of its own, and returns the
// context of its first tab, open and ready. The browser lives until ctx ends or the test
// does; then it stops and its profile is removed. chromedp's protocol complaints go to the
// test's log while the test runs.
func StartChromium(t *testing.T, ctx context.Context) (tab context.Context) {
	t.Helper()
	bin := ChromiumPath(t)
	profile, err := os.MkdirTemp("", "gpumarket-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Chromium's helpers can write in the profile for a moment after the browser stops.
		for range 50 {
			if err := os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true), // /dev/shm is small in containers
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	t.Cleanup(cancelAlloc) // waits for the browser process to end

	// chromedp logs protocol trouble from its own goroutines: into the test's log while the
	// test runs, nowhere after.
	var mu sync.Mutex
	done := false
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			t.Logf("chromium: "+format, args...)
		}
	}
	tab, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		cancelTab()
		mu.Lock()
		done = true
		mu.Unlock()
	})
	start := time.Now()
	if err := chromedp.Do(tab); err != nil { // starts the browser and opens the tab
		t.Fatalf("start Chromium (%s): %v", bin, err)
	}
	t.Logf("Chromium (%s) started in %v", bin, time.Since(start).Round(time.Millisecond))
	return tab
}
