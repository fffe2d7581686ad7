package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/invoicing"
	"github.com/gpumarket/gpumarket/services/metering"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/web/internal/core"
	"github.com/gpumarket/gpumarket/web/webtest"
)

// pageCallers are the kinds of user whose every page is checked: a visitor, a customer
// account's owner, its developer and billing members, a provider, finance and an administrator.
var pageCallers = []caller{anonymous, developer, customerDeveloper, customerBilling, provider, finance, admin}

// pageWidths are the screens every page must fit: a laptop's and a phone's (docs/pages.md).
var pageWidths = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"1366", 1366, 768, false}, {"390", 390, 844, true}}

// navWanted are links the header must show, or not, to a caller: a member sees the pages of
// its member role, not those of its account's owner.
var navWanted = map[caller][]struct {
	href  string
	shown bool
}{
	anonymous:         {{"/catalog", true}, {"/usage", false}, {"/finance/balances", false}},
	developer:         {{"/keys", true}, {"/credits", true}, {"/invoices", true}, {"/provider/rigs", false}},
	customerDeveloper: {{"/keys", true}, {"/usage", true}, {"/credits", false}, {"/invoices", false}},
	customerBilling:   {{"/keys", false}, {"/batches", false}, {"/credits", true}, {"/invoices", true}, {"/usage", true}},
	provider:          {{"/provider/rigs", true}, {"/provider/statements", true}, {"/keys", false}},
	finance:           {{"/finance/invoices", true}, {"/admin/users", false}, {"/invoices", false}},
	admin:             {{"/finance/invoices", true}, {"/admin/users", true}, {"/keys", false}},
}

// pageFixtures are the records the pages with ids in their paths are opened with, each the
// caller's own where the page is about its own records.
type pageFixtures struct {
	offering            string // an offering of the demo provider (Fjord GPU Co-op)
	key                 string // an API key of the demo developer's account (Acme Labs)
	member              string // the user id of Acme Labs' developer member
	ownInvoice          string // Acme Labs' issued invoice of last month
	ownStatement        string // Fjord's issued statement of last month
	draftInvoice        string // a draft invoice of last month, for finance to approve
	draftStatement      string // a draft statement of last month, for finance to approve
	invoice, creditNote string // another developer's voided invoice and its credit note
	statement           string // another provider's issued statement
	batch               string // a batch of Acme Labs under way, a quarter of its lines done
	// Each caller's session, and the token its cookie carries.
	sessionOf       map[caller]accounts.Session
	sessionCookieOf map[caller]string
}

// pagePaths fills a page route's ids for the caller: the path to open, or "" to leave the page
// out for that caller. Every page route with an id must have a row: add one with a new page.
var pagePaths = map[string]func(f *pageFixtures, c caller) string{
	"/provider/rigs/:id/edit": func(f *pageFixtures, c caller) string { return "/provider/rigs/" + f.offering + "/edit" },
	// How a rig connects needs the platform's NATS, which these tests' server has not: rigs_site_test.go opens it.
	"/provider/rigs/:id/connect":   func(*pageFixtures, caller) string { return "" },
	"/provider/rigs/:id/benchmark": func(f *pageFixtures, c caller) string { return "/provider/rigs/" + f.offering + "/benchmark" },
	"/keys/:id/revoke":             func(f *pageFixtures, c caller) string { return "/keys/" + f.key + "/revoke" },
	"/batches/:id":                 func(f *pageFixtures, c caller) string { return "/batches/" + f.batch },
	"/account/members/:id/remove": func(f *pageFixtures, c caller) string {
		if c != developer {
			return "" // the member is Acme Labs', and only its owner and admins may remove one
		}
		return "/account/members/" + f.member + "/remove"
	},
	"/invoices/:id": func(f *pageFixtures, c caller) string {
		return "/invoices/" + byStaff(c, f.invoice, f.ownInvoice)
	},
	"/credit-notes/:id": func(f *pageFixtures, c caller) string {
		return "/credit-notes/" + byStaff(c, f.creditNote, "") // the demo developer has no credit note
	},
	"/statements/:id": func(f *pageFixtures, c caller) string {
		return "/statements/" + byStaff(c, f.statement, f.ownStatement)
	},
	"/finance/invoices/:id":         func(f *pageFixtures, c caller) string { return "/finance/invoices/" + f.ownInvoice },
	"/finance/invoices/:id/approve": func(f *pageFixtures, c caller) string { return "/finance/invoices/" + f.draftInvoice + "/approve" },
	"/finance/invoices/:id/void": func(f *pageFixtures, c caller) string {
		return "/finance/invoices/" + f.ownInvoice + "/void?reason=wrong_details"
	},
	// The issued invoice here is not one its actions let finance mark paid (409).
	"/finance/invoices/:id/paid":      func(*pageFixtures, caller) string { return "" },
	"/finance/statements/:id":         func(f *pageFixtures, c caller) string { return "/finance/statements/" + f.ownStatement },
	"/finance/statements/:id/approve": func(f *pageFixtures, c caller) string { return "/finance/statements/" + f.draftStatement + "/approve" },
	"/finance/statements/:id/void": func(f *pageFixtures, c caller) string {
		return "/finance/statements/" + f.ownStatement + "/void?reason=wrong_details"
	},
	"/finance/statements/:id/paid": func(f *pageFixtures, c caller) string { return "/finance/statements/" + f.ownStatement + "/paid" },
	// A retry is offered for a failed payout only, and these tests' payouts do not fail.
	"/finance/payouts/:id/retry": func(*pageFixtures, caller) string { return "" },
	// The local test payment page serves only GPUMARKET_PAYMENTS=test (checkout_browser_test.go).
	"/credits/test-pay/:id": func(*pageFixtures, caller) string { return "" },
	// A batch's file is a download, not a page.
	"/batches/files/:id": func(*pageFixtures, caller) string { return "" },
	// What a rig downloads is a file, not a page.
	"/downloads/:name": func(*pageFixtures, caller) string { return "" },
}

// byStaff is the staff's record for finance and the administrators, else the caller's own; ""
// leaves the page out.
func byStaff(c caller, staff, own string) string {
	if c == finance || c == admin {
		return staff
	}
	return own
}

// notPages are the GET routes that serve no page to a person: among them the progress blocks
// that pages poll and put in place (docs/progress.md), which the pages holding them bring here.
var notPages = regexp.MustCompile(`^/(api|v1|static)/|^/(healthz|readyz|metrics)$|\*|[./](csv|pdf)$|/progress$`)

// TestEveryPageFitsAndIsAccessible checks each kind of user's header (it links only what the
// access table lets the user view, and folds into a menu on a phone), then opens every page the
// user may reach, found from the router and the access table, at a laptop's width and a phone's,
// and fails a page that scrolls
// sideways (naming the element that sticks out furthest), that puts a table in a box that scrolls
// sideways, whose charts' text renders below 11 px, that logs an error to the console or throws,
// that axe-core finds a serious or critical accessibility violation on, that a keyboard cannot
// use (a form control or link out of the Tab order, a positive tabindex, an element that reacts to
// clicks without being a button or link, a form without a submit button), or, at a phone's width,
// a table with a header whose cells do not all name their column for its cards (data-label). With
// GPUMARKET_TEST_ARTEFACTS set, a screenshot of each page at each width is kept there, under pages/.
func TestEveryPageFitsAndIsAccessible(t *testing.T) {
	t.Parallel()
	started := time.Now()
	axe := webtest.AxeSource(t)
	a := newAuthzEnv(t, anonymous)
	f := pageWorld(t, a)
	t.Logf("fixtures ready in %v", time.Since(started).Round(time.Millisecond))

	// Each caller's pages: the router's GET routes that serve a page, those the access table
	// lets the caller view, ids filled from the fixtures, and of them those that answer with a
	// page (a logged-in user's /login sends it home; a document's PDF is a download).
	var patterns []string
	for _, r := range a.server.Echo().Routes() {
		if r.Method == http.MethodGet && !notPages.MatchString(r.Path) && !slices.Contains(patterns, r.Path) {
			patterns = append(patterns, r.Path)
		}
	}
	slices.Sort(patterns)
	pages := map[caller][]pageToCheck{}
	for _, c := range pageCallers {
		for _, pattern := range patterns {
			if !core.MayView(f.sessionOf[c], pattern) {
				continue
			}
			path := pattern
			if strings.Contains(pattern, ":") {
				fill, ok := pagePaths[pattern]
				if !ok {
					t.Errorf("page %s has ids in its path: add to pagePaths how to fill them", pattern)
					continue
				}
				if path = fill(f, c); path == "" || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
					continue
				}
			}
			status, html := pageAnswer(t, a.srv.URL+path, f.sessionCookieOf[c])
			switch {
			case status >= 500:
				t.Errorf("GET %s as %s: status %d", path, c, status)
			case status == http.StatusOK && html:
				pages[c] = append(pages[c], pageToCheck{pattern, path})
			case strings.Contains(pattern, ":"):
				t.Errorf("GET %s as %s: status %d (html %v), want a page: fix its row in pagePaths", path, c, status, html)
			}
		}
		var paths []string
		for _, p := range pages[c] {
			paths = append(paths, p.path)
		}
		t.Logf("%s: %d pages: %s", c, len(paths), strings.Join(paths, " "))
	}

	artefacts := os.Getenv("GPUMARKET_TEST_ARTEFACTS")
	if artefacts != "" {
		artefacts = filepath.Join(artefacts, "pages")
		if err := os.MkdirAll(artefacts, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deadline, cancel := context.WithTimeout(context.Background(), 420*time.Second) // a busy machine takes twice the quiet one's three minutes
	defer cancel()
	first := webtest.StartChromium(t, deadline)
	// Two tabs, each in a browser context of its own (its own cookies), check the callers' pages
	// side by side.
	tabs := make(chan *pageTab, 2)
	for range cap(tabs) {
		tabs <- newPageTab(t, first, a.srv.URL, axe)
	}
	run := &pageRun{fixtures: f, artefacts: artefacts, axed: map[string]bool{}}
	t.Run("pages", func(t *testing.T) {
		for _, c := range pageCallers {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				tab := <-tabs
				defer func() { tabs <- tab }()
				tab.b.t = t
				t.Cleanup(func() {
					if t.Failed() {
						tab.b.logPage()
					}
				})
				run.check(t, tab, c, pages[c])
			})
		}
	})
	t.Logf("%d page loads checked (axe-core on %d) in %v: %v opening, %v measuring and axe, %v screenshots", run.checked,
		run.axeRuns, time.Since(started).Round(time.Millisecond), run.opening.Round(time.Millisecond),
		run.checking.Round(time.Millisecond), run.shooting.Round(time.Millisecond))
}

// pageToCheck is a page a caller opens: its route's pattern and its path.
type pageToCheck struct{ pattern, path string }

// pageTab is a tab, in a browser context of its own, that opens the pages: it gathers the
// console's errors and the uncaught exceptions of the page open in it.
type pageTab struct {
	b        *browser
	mu       sync.Mutex
	problems []string
}

// newPageTab opens a tab in a new browser context of the browser of first, with axe-core put
// into every page it opens.
func newPageTab(t *testing.T, first context.Context, base, axe string) *pageTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(first, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	pt := &pageTab{b: &browser{t: t, ctx: ctx, base: base}}
	if err := chromedp.Listen(ctx, pt.record); err != nil {
		t.Fatal(err)
	}
	// axe-core goes into every page the tab opens, by the test: the pages load no such script;
	// so does a note of the elements that listen for clicks, for the keyboard's check.
	pt.b.do("inject axe-core", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, src := range []string{clickListeners, axe} {
			if _, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
				return err
			}
		}
		return nil
	}))
	return pt
}

// clickListeners runs before a page's own scripts and notes each element that a script gives a
// listener for a click or a press of the pointer (window.__clickTargets lists them): such an
// element must be a button or a link, which the keyboard reaches and presses.
const clickListeners = `(() => {
	const kinds = new Set(["click", "dblclick", "auxclick", "mousedown", "mouseup", "pointerdown", "pointerup", "touchstart", "touchend"]);
	const targets = new Set();
	const add = EventTarget.prototype.addEventListener;
	EventTarget.prototype.addEventListener = function (type, ...rest) {
		if (kinds.has(type) && this instanceof Element) targets.add(this);
		return add.call(this, type, ...rest);
	};
	Object.defineProperty(window, "__clickTargets", {value: () => [...targets].filter(el => el.isConnected)});
})()`

// record keeps a console error, an uncaught exception or an error the browser logs.
func (pt *pageTab) record(ev any) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, arg := range ev.Args {
				args = append(args, strings.Trim(string(arg.Value), `"`)+arg.Description)
			}
			pt.problems = append(pt.problems, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		pt.problems = append(pt.problems, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			pt.problems = append(pt.problems, fmt.Sprintf("%s error: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// take returns the problems recorded since the last call and forgets them.
func (pt *pageTab) take() []string {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	p := pt.problems
	pt.problems = nil
	return p
}

// pageRun is what the callers' checks share: the fixtures, which pages axe-core checked, and the
// time each part took.
type pageRun struct {
	fixtures  *pageFixtures
	artefacts string

	mu                          sync.Mutex
	axed                        map[string]bool // pattern and width
	checked, axeRuns            int
	opening, checking, shooting time.Duration
}

// firstAxe reports whether axe-core has yet to check the page at the width, and marks it checked.
func (r *pageRun) firstAxe(pattern, width string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := pattern + " " + width
	first := !r.axed[key]
	r.axed[key] = true
	if first {
		r.axeRuns++
	}
	return first
}

// took adds a check's times.
func (r *pageRun) took(opening, checking, shooting time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked++
	r.opening += opening
	r.checking += checking
	r.shooting += shooting
}

// check logs the tab in as the caller, checks its header's links, then opens each of its pages
// at each width and checks it.
func (r *pageRun) check(t *testing.T, tab *pageTab, c caller, pages []pageToCheck) {
	b, f := tab.b, r.fixtures
	b.do("log in as "+c.String(), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{}); err != nil || c == anonymous {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: "gpumarket_session",
			Value: f.sessionCookieOf[c], URL: b.base})
		return err
	}))
	// The header links only pages the access table lets the caller view, in the account in use.
	b.open("/catalog")
	links := browserRun(b, "read the navigation", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#site-nav a")].map(a => a.getAttribute("href"))`))
	for _, href := range links {
		if !core.MayView(f.sessionOf[c], href) {
			t.Errorf("the header links %s for %s, who may not view it", href, c)
		}
	}
	for _, want := range navWanted[c] {
		if got := slices.Contains(links, want.href); got != want.shown {
			t.Errorf("the header for %s links %s: %v, want %v (links: %v)", c, want.href, got, want.shown, links)
		}
	}
	for _, w := range pageWidths {
		b.do(fmt.Sprintf("resize to %d px", w.width), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
				Width: w.width, Height: w.height, DeviceScaleFactor: 1, Mobile: w.mobile})
			return err
		}))
		if w.mobile {
			r.checkFoldedMenu(t, tab, c, w.width)
		}
		for _, pg := range pages {
			where := fmt.Sprintf("%s at %s px as %s", pg.path, w.name, c)
			tab.take()
			t0 := time.Now()
			st := b.open(pg.path)
			opening := time.Since(t0)
			if st != http.StatusOK {
				t.Errorf("%s: status %d", where, st)
				continue
			}
			// axe-core checks a page once at each width: another role's view of the same page
			// differs in the header, which axe checks on that role's other pages.
			runAxe := r.firstAxe(pg.pattern, w.name)
			t0 = time.Now()
			report := browserRun(b, "check "+where, chromedp.Evaluate[pageReport](
				fmt.Sprintf("(%s)(%d, %v, %v)", pageCheckScript, w.width, runAxe, w.mobile), chromedp.EvalAwaitPromise))
			checking := time.Since(t0)
			if report.Overflow != "" {
				t.Errorf("%s: the page scrolls sideways (%d px wide in a %d px window); furthest out: %s",
					where, report.ScrollWidth, report.InnerWidth, report.Overflow)
			}
			for _, s := range report.Scrollers {
				t.Errorf("%s: a table scrolls sideways in a box: %s", where, s)
			}
			for _, s := range report.SmallText {
				t.Errorf("%s: chart text below 11 px: %s", where, s)
			}
			for _, v := range report.Violations {
				t.Errorf("%s: axe %s", where, v)
			}
			for _, u := range report.Unlabelled {
				t.Errorf("%s: a table's cells have no data-label, so a phone's card shows their values unnamed: %s", where, u)
			}
			for _, k := range report.Keyboard {
				t.Errorf("%s: not usable from the keyboard: %s", where, k)
			}
			for _, p := range tab.take() {
				t.Errorf("%s: %s", where, p)
			}
			var shooting time.Duration
			if r.artefacts != "" {
				t0 = time.Now()
				png := browserRun(b, "screenshot "+where, chromedp.FullScreenshot(100))
				name := fmt.Sprintf("%s-%s-%s.png", c, w.name, pageSlug(pg.path))
				if err := os.WriteFile(filepath.Join(r.artefacts, name), png, 0o644); err != nil {
					t.Fatal(err)
				}
				shooting = time.Since(t0)
			}
			r.took(opening, checking, shooting)
		}
	}
}

// checkFoldedMenu checks the header on a phone's screen: its links are folded away until the
// menu toggle is pressed, then shown within the screen.
func (r *pageRun) checkFoldedMenu(t *testing.T, tab *pageTab, c caller, width int64) {
	b := tab.b
	b.open("/catalog")
	const shown = `[...document.querySelectorAll("#site-nav a")].filter(a => a.getClientRects().length > 0).length`
	if n := browserRun(b, "count the links shown", chromedp.Evaluate[int](shown)); n != 0 {
		t.Errorf("at %d px as %s the header shows %d links before its menu is opened", width, c, n)
	}
	b.do("open the menu", click(testID("nav-toggle")))
	links := browserRun(b, "count the links shown", chromedp.Evaluate[int](shown))
	if want := browserRun(b, "count the links", chromedp.Evaluate[int](`document.querySelectorAll("#site-nav a").length`)); links != want || links == 0 {
		t.Errorf("at %d px as %s the open menu shows %d of %d links", width, c, links, want)
	}
	right := browserRun(b, "measure the menu", chromedp.Evaluate[float64](
		`Math.max(document.documentElement.scrollWidth, ...[...document.querySelectorAll("#site-nav a")].map(a => a.getBoundingClientRect().right))`))
	if right > float64(width) {
		t.Errorf("at %d px as %s the open menu reaches %.0f px", width, c, right)
	}
	if r.artefacts != "" {
		png := browserRun(b, "screenshot the open menu", chromedp.CaptureScreenshot())
		if err := os.WriteFile(filepath.Join(r.artefacts, fmt.Sprintf("%s-%d-menu.png", c, width)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pageReport is what pageCheckScript finds on a page.
type pageReport struct {
	ScrollWidth int      `json:"scrollWidth"`
	InnerWidth  int      `json:"innerWidth"`
	Overflow    string   `json:"overflow"`   // the element furthest out when the page scrolls sideways
	Scrollers   []string `json:"scrollers"`  // boxes in which a table scrolls sideways
	SmallText   []string `json:"smallText"`  // chart labels that render below 11 px
	Violations  []string `json:"violations"` // axe-core's serious and critical violations
	// Unlabelled are the tables with a header whose cells lack the data-label that names their
	// column on a phone's card (checked at a phone's width).
	Unlabelled []string `json:"unlabelled"`
	// Keyboard are the elements the keyboard cannot use as a mouse can: a form control or link
	// taken out of the Tab order, a positive tabindex (which reorders Tab), an element that
	// reacts to clicks without being a button or link, a form without a submit button.
	Keyboard []string `json:"keyboard"`
}

// pageCheckScript measures the page open in the tab and, when asked, runs axe-core on it.
const pageCheckScript = `async (width, runAxe, phone) => {
	const name = el => {
		let s = el.tagName.toLowerCase();
		if (el.getAttribute("id")) s += "#" + el.getAttribute("id");
		if (el.dataset && el.dataset.testid) s += "[data-testid=" + el.dataset.testid + "]";
		if (typeof el.className === "string" && el.className.trim()) s += "." + el.className.trim().split(/\s+/).join(".");
		return s;
	};
	const path = el => { const p = []; for (let e = el; e && e !== document.body && p.length < 4; e = e.parentElement) p.unshift(name(e)); return p.join(" > "); };
	const text = el => (el.innerText || el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 60);
	// A phone's browser widens its viewport to a page that does not fit: the page must fit the
	// screen's width, not the viewport's.
	const r = {scrollWidth: document.documentElement.scrollWidth, innerWidth: width, overflow: "", scrollers: [], smallText: [], violations: [],
		unlabelled: [], keyboard: []};
	if (r.scrollWidth > width) {
		let worst = null, right = width, wide = 0;
		for (const el of document.body.querySelectorAll("*")) {
			const b = el.getBoundingClientRect();
			if (b.width === 0 || b.height === 0) continue;
			if (b.right > right + 0.5 || (worst && b.right >= right - 0.5 && b.width > wide && worst.contains(el))) { worst = el; right = b.right; wide = b.width; }
		}
		r.overflow = worst ? path(worst) + " (" + Math.round(wide) + " px wide, right edge at " + Math.round(right) + " px) «" + text(worst) + "»" : "nothing visible";
	}
	const scrollers = new Set();
	for (const table of document.querySelectorAll("main table")) {
		for (let el = table.parentElement; el && el !== document.body; el = el.parentElement) {
			const ox = getComputedStyle(el).overflowX;
			if ((ox === "auto" || ox === "scroll" || ox === "hidden") && el.scrollWidth > el.clientWidth + 1 && !scrollers.has(el)) {
				scrollers.add(el);
				r.scrollers.push(path(el) + " (" + el.scrollWidth + " px of table in " + el.clientWidth + " px)");
			}
		}
	}
	for (const svg of document.querySelectorAll("svg")) {
		let least = Infinity, small = 0, example = "";
		for (const t of svg.querySelectorAll("text")) {
			const m = t.getScreenCTM();
			if (!m || !t.getBoundingClientRect().width) continue;
			const px = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
			if (px < 10.95) { small++; if (px < least) { least = px; example = text(t); } }
		}
		if (small) r.smallText.push(path(svg) + ": " + small + " label(s), the smallest «" + example + "» at " + least.toFixed(1) + " px");
	}
	// On a phone a table is a list of cards, each cell named by its data-label (docs/pages.md):
	// every cell of a table with a header carries one, but a cell spanning columns (a note under
	// a row), which no one column names.
	if (phone) {
		for (const table of document.querySelectorAll("table")) {
			if (!table.tHead) continue;
			const heads = table.tHead.rows.length ? [...table.tHead.rows[table.tHead.rows.length - 1].cells].map(text) : [];
			const columns = new Set();
			let missing = 0;
			for (const section of [...table.tBodies, table.tFoot].filter(Boolean)) {
				for (const row of section.rows) {
					for (const cell of row.cells) {
						if (cell.tagName !== "TD" || cell.colSpan > 1 || (cell.getAttribute("data-label") || "").trim()) continue;
						missing++;
						columns.add("«" + (heads[cell.cellIndex] || "column " + (cell.cellIndex + 1)) + "»");
					}
				}
			}
			if (missing) r.unlabelled.push(path(table) + ": " + missing + " cell(s), in " + [...columns].join(", "));
		}
	}
	// From the keyboard: Tab reaches every form control and link in the page's order, and only
	// buttons and links (and the form controls) react to a click.
	// The same problem on every row of a table is told once, with how many.
	const keyboard = new Map();
	const problem = s => keyboard.set(s, (keyboard.get(s) || 0) + 1);
	const controls = "input:not([type=hidden]), select, textarea, button, a[href]";
	for (const el of document.querySelectorAll("[tabindex]")) {
		const ti = parseInt(el.getAttribute("tabindex"), 10);
		if (ti > 0) problem("tabindex " + ti + " reorders Tab: " + path(el));
		else if (ti < 0 && el.matches(controls)) problem("tabindex " + ti + " keeps Tab from it: " + path(el) + " «" + text(el) + "»");
	}
	const clickable = new Set(window.__clickTargets ? window.__clickTargets() : []);
	const handlers = ["onclick", "ondblclick", "onauxclick", "onmousedown", "onmouseup", "onpointerdown", "onpointerup", "ontouchstart", "ontouchend"];
	for (const el of document.querySelectorAll("*")) {
		if (handlers.some(h => el.hasAttribute(h) || typeof el[h] === "function")) clickable.add(el);
	}
	for (const el of clickable) {
		if (!el.matches(controls + ", summary, label")) problem("reacts to clicks but is no button or link: " + path(el) + " «" + text(el) + "»");
	}
	for (const form of document.forms) {
		const submits = [...form.elements].filter(el => (el.tagName === "BUTTON" && el.type === "submit") || (el.tagName === "INPUT" && (el.type === "submit" || el.type === "image")));
		if (!submits.length) problem("a form without a submit button: " + path(form));
	}
	for (const [s, n] of keyboard) r.keyboard.push(n > 1 ? s + " (" + n + " times)" : s);
	const res = runAxe ? await axe.run(document, {resultTypes: ["violations"]}) : {violations: []};
	for (const v of res.violations) {
		if (v.impact !== "serious" && v.impact !== "critical") continue;
		const nodes = v.nodes.slice(0, 3).map(n => n.target.join(" ") + (n.failureSummary ? " (" + n.failureSummary.replace(/\s+/g, " ").slice(0, 160) + ")" : ""));
		r.violations.push(v.impact + " " + v.id + ": " + v.help + " on " + v.nodes.length + " element(s): " + nodes.join("; "));
	}
	return r;
}`

// pageAnswer is the status of a GET of the URL with the session cookie, and whether it answers
// with a page.
func pageAnswer(t *testing.T, url, session string) (int, bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: "gpumarket_session", Value: session})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, strings.HasPrefix(res.Header.Get("Content-Type"), "text/html")
}

// pageSlug names a page's screenshot after its path.
func pageSlug(path string) string {
	s := strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(path, "-"), "-")
	if s == "" {
		return "home"
	}
	return s
}

// pageWorld makes the records the pages are opened with on a's server, whose last month is
// closed (newAuthzEnv), and logs each caller in: the members join the demo developer's account.
func pageWorld(t *testing.T, a *authzEnv) *pageFixtures {
	t.Helper()
	ctx := context.Background()
	f := &pageFixtures{invoice: a.invoice, creditNote: a.creditNote, statement: a.statement,
		sessionOf: map[caller]accounts.Session{}, sessionCookieOf: map[caller]string{}}
	for _, c := range pageCallers {
		if c == anonymous {
			continue
		}
		if c.isMember() {
			a.join(t, c)
		}
		sess, err := a.accounts.Login(ctx, accounts.LoginInput{Email: c.email(), Password: demo.Password, ClientIP: "pages-" + c.String()})
		if err != nil {
			t.Fatalf("log in as %s: %v", c, err)
		}
		f.sessionOf[c], f.sessionCookieOf[c] = sess, sess.Token
	}
	f.member = f.sessionOf[customerDeveloper].User.ID
	dev := f.sessionOf[developer]
	k, _, err := a.accounts.CreateKey(ctx, dev.User, accounts.NewKeyInput{Name: "the pages' key"})
	if err != nil {
		t.Fatal(err)
	}
	f.key = k.ID
	rigs, err := a.catalog.ListOwn(ctx, f.sessionOf[provider].Account.ID)
	if err != nil || len(rigs) == 0 {
		t.Fatalf("the demo provider's rigs: %v, %d", err, len(rigs))
	}
	f.offering = rigs[0].ID
	now := time.Now()
	f.batch = runningBatch(t, a.env, batch.NewService(batch.Config{Pool: a.pool, Storage: batch.LocalDir{Dir: t.TempDir()}}),
		dev.Account.ID, now, 40, []time.Time{now.Add(-3 * time.Minute), now.Add(-2 * time.Minute), now.Add(-time.Minute)})

	// The discrepancies list an open one, with its form to resolve it, and one resolved.
	flagRequest(t, a.pool, "req_pages_open", 9001)
	flagRequest(t, a.pool, "req_pages_resolved", 9002)
	if _, err := requestlog.NewRequestLog(a.pool, metering.GatewayReads{}, nil, nil).ResolveDiscrepancy(ctx, a.audit, requestlog.ResolveInput{
		RequestID: "req_pages_resolved", By: f.sessionOf[admin].User.ID, Note: "A retried attempt, billed once."}); err != nil {
		t.Fatal(err)
	}

	fin := f.sessionOf[finance].User.ID
	last := invoicing.PeriodOf(time.Now()).Prev()
	invoices, err := a.invoicing.Invoices(ctx, invoicing.InvoiceFilter{Period: last})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range invoices.Invoices {
		switch {
		case s.AccountID == dev.Account.ID && s.Status == invoicing.StatusDraft:
			f.ownInvoice = s.ID
		case s.Status == invoicing.StatusDraft && f.draftInvoice == "":
			f.draftInvoice = s.ID
		}
	}
	statements, err := a.invoicing.Statements(ctx, invoicing.StatementFilter{Period: last})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range statements.Statements {
		switch {
		case s.ProviderAccountID == f.sessionOf[provider].Account.ID && s.Status == invoicing.StatusDraft:
			f.ownStatement = s.ID
		case s.Status == invoicing.StatusDraft && f.draftStatement == "":
			f.draftStatement = s.ID
		}
	}
	if f.ownInvoice == "" || f.draftInvoice == "" || f.ownStatement == "" || f.draftStatement == "" {
		t.Fatalf("last month's drafts: own invoice %q, another %q, own statement %q, another %q",
			f.ownInvoice, f.draftInvoice, f.ownStatement, f.draftStatement)
	}
	if res, err := a.invoicing.ApproveInvoices(ctx, fin, []string{f.ownInvoice}); err != nil || res[0].Err != nil {
		t.Fatalf("approve Acme's invoice: %v %v", err, res)
	}
	if res, err := a.invoicing.ApproveStatements(ctx, fin, []string{f.ownStatement}); err != nil || res[0].Err != nil {
		t.Fatalf("approve Fjord's statement: %v %v", err, res)
	}
	return f
}
