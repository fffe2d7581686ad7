package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/demo"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/web/webtest"
)

// The developer's journey the gateway is for, in a real browser and with the official SDK: a
// developer creates a key on the keys page, an unmodified OpenAI client pointed at the
// gateway streams a completion from a model's batch tier and from its realtime tier, the
// response headers name the GPU that served each, and the usage page lists both requests
// with their tier, their hardware and their cost.

const (
	journeyTimeout     = 30 * time.Second // the whole journey: browser, SDK calls and metering
	journeyStepTimeout = 10 * time.Second // one browser step: a page load, a click, a query
)

// journeyTab is one tab of a headless Chromium of its own, on the platform's site. Its
// methods fail the test, with the page's address and text in the log, when a step fails.
type journeyTab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newJourneyTab starts Chromium with a fresh profile; it stops, and the profile is removed,
// when the test ends.
func newJourneyTab(t *testing.T, ctx context.Context, baseURL string) *journeyTab {
	t.Helper()
	b := &journeyTab{t: t, ctx: webtest.StartChromium(t, ctx), base: strings.TrimRight(baseURL, "/")}
	t.Cleanup(func() { // before the tab closes: where a failed test left the browser
		if t.Failed() {
			b.logPage()
		}
	})
	return b
}

// step runs f under the step deadline and fails the test with what when it errs.
func (b *journeyTab) step(what string, f func(ctx context.Context) error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, journeyStepTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (step limit %v, journey limit %v)", err, journeyStepTimeout, journeyTimeout)
		}
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// navigate runs actions that lead to a new page (a navigation, a submit button) and returns
// the response of its document, the last one after redirects.
func (b *journeyTab) navigate(what string, actions ...chromedp.Action[chromedp.Void]) *http.Response {
	b.t.Helper()
	var res *http.Response
	b.step(what, func(ctx context.Context) error {
		r, err := chromedp.RunResponse(ctx, actions...)
		if err == nil && r != nil {
			res = &http.Response{StatusCode: int(r.Status), Header: http.Header{}}
			for k, v := range r.Headers {
				res.Header.Set(k, fmt.Sprint(v))
			}
		}
		return err
	})
	return res
}

// open loads a page of the site by path and fails unless it answers want.
func (b *journeyTab) open(path string, want int) {
	b.t.Helper()
	if res := b.navigate("open "+path, chromedp.Navigate(b.base+path)); res == nil || res.StatusCode != want {
		b.t.Fatalf("GET %s: %+v, want status %d", path, res, want)
	}
}

// do runs actions that return nothing.
func (b *journeyTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.step(what, func(ctx context.Context) error { return chromedp.Do(ctx, actions...) })
}

// text is the text of the first element sel matches, trimmed, once it is in the page.
func (b *journeyTab) text(sel string) string {
	b.t.Helper()
	var v string
	b.step("read the text of "+sel, func(ctx context.Context) (err error) {
		v, err = chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel), chromedp.NodeReady))
		return err
	})
	return strings.TrimSpace(v)
}

// attr is an attribute of the first element sel matches, once it is in the page.
func (b *journeyTab) attr(sel, name string) string {
	b.t.Helper()
	var v chromedp.AttributeResult
	b.step("read "+name+" of "+sel, func(ctx context.Context) (err error) {
		v, err = chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name, chromedp.NodeReady))
		return err
	})
	return v.Value
}

// eval is the value of a JavaScript expression in the page.
func (b *journeyTab) eval(what, expr string) string {
	b.t.Helper()
	var v string
	b.step(what, func(ctx context.Context) (err error) {
		v, err = chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		return err
	})
	return v
}

// count is how many elements sel matches now, without waiting.
func (b *journeyTab) count(sel string) int {
	b.t.Helper()
	var n int
	b.step("count "+sel, func(ctx context.Context) (err error) {
		n, err = chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		return err
	})
	return n
}

// logPage writes where the tab is and what it shows into the test log.
func (b *journeyTab) logPage() {
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

func journeyFill(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Clear(chromedp.CSS(sel), chromedp.NodeVisible), chromedp.SendKeys(chromedp.CSS(sel), value, chromedp.NodeVisible))
}

func journeyClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)
}

func byTestID(id string) string { return fmt.Sprintf("[data-testid=%q]", id) }

// hardwareOf is how the gateway's header and the usage page name an offering's rig: its GPU
// count and the GPU model's name, "4x NVIDIA GeForce RTX 4090".
func hardwareOf(t *testing.T, o catalog.Offering) string {
	t.Helper()
	g, ok := catalog.GPUBySKU(o.GPU)
	if !ok {
		t.Fatalf("offering %s: unknown GPU %q", o.ID, o.GPU)
	}
	return fmt.Sprintf("%dx %s", o.GPUCount, g.Name)
}

func (b *gatewayBundle) testBrowserJourney(t *testing.T) {
	// Cancelled last, after the browser's cleanups have logged where a failure left it.
	ctx, cancel := context.WithTimeout(b.ctx, journeyTimeout)
	t.Cleanup(cancel)

	// One model in two tiers, as testTierChoice lists it: realtime on one H100 at a dear
	// ask, batch on four RTX 4090s at a cheap one.
	const model = "gw-journey"
	realtime := b.list(t, rigSpec{model: model, gpu: "h100-pcie", count: 1, ask: 200_000, p99: 40})
	batch := b.list(t, rigSpec{model: model, gpu: "rtx-4090", count: 4, ask: 60_000, p99: 2000})
	if realtime.Tier != catalog.TierRealtime || batch.Tier != catalog.TierBatch {
		t.Fatalf("listed in %s and %s, want realtime and batch", realtime.Tier, batch.Tier)
	}
	offerings := map[catalog.Tier]catalog.Offering{catalog.TierBatch: batch, catalog.TierRealtime: realtime}

	dev, _, _ := b.developer(t, "journey", 20*money.PicoPerUSD, accounts.NewKeyInput{})
	start := b.balance(t, dev.AccountID)

	// 1. The developer logs in and creates a key on the keys page.
	tab := newJourneyTab(t, ctx, b.p.URL())
	tab.open("/login", http.StatusOK)
	tab.do("fill the login form", journeyFill("#email", dev.Email), journeyFill("#password", demo.Password))
	if res := tab.navigate("log in", journeyClick(byTestID("login-submit"))); res == nil || res.StatusCode != http.StatusOK {
		t.Fatalf("after logging in: %+v", res)
	}
	if n := tab.count(byTestID("form-error")); n != 0 {
		t.Fatalf("the login was refused: %s", tab.text(byTestID("form-error")))
	}
	tab.open("/keys", http.StatusOK)
	const keyName = "journey laptop"
	tab.do("name the key", journeyFill("#name", keyName))
	res := tab.navigate("create the key", journeyClick(byTestID("key-submit")))
	if res == nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("creating the key: %+v, want 201", res)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the page that shows the secret has Cache-Control %q, want no-store", cc)
	}
	secret := tab.text(byTestID("created-secret"))
	if got := tab.text(byTestID("created-name")); got != keyName {
		t.Errorf("created key named %q, want %q", got, keyName)
	}
	if secret == "" || strings.ContainsAny(secret, " \n") {
		t.Fatalf("the created key reads %q", secret)
	}

	// Shown once: after a fresh load the list shows the key by its prefix, and the secret is
	// nowhere in the page.
	tab.open("/keys", http.StatusOK)
	keys, err := b.p.accounts.Keys(ctx, dev.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	var created accounts.APIKey
	for _, k := range keys {
		if k.Name == keyName {
			created = k
		}
	}
	if created.ID == "" || created.Prefix == "" || !strings.HasPrefix(secret, created.Prefix) {
		t.Fatalf("the account's keys %+v: none is named %q with a prefix of the secret the page showed", keys, keyName)
	}
	row := fmt.Sprintf(`%s[data-key=%q]`, byTestID("key"), created.ID)
	if tab.count(row) != 1 {
		t.Fatalf("the key %q is not in the key list after a reload", keyName)
	}
	if shown := tab.text(row + " " + byTestID("key-prefix")); shown != created.Prefix+"…" || len(created.Prefix) >= len(secret) {
		t.Errorf("the key list shows %q for the key %q: want a strict prefix of it followed by …", shown, secret)
	}
	if st := tab.text(row + " " + byTestID("key-status")); st != "live" {
		t.Errorf("the new key's status is %q, want live", st)
	}
	if n := tab.count(byTestID("created-secret")); n != 0 {
		t.Errorf("the keys page shows a created secret again after a reload")
	}
	if html := tab.eval("read the keys page", `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Errorf("the keys page still contains the whole secret after a reload")
	}

	// 2. The official SDK, pointed at the gateway with the key read from the page, streams a
	// completion from each tier and asks for the usage chunk.
	client := b.client(secret)
	hardwareHeader := regexp.MustCompile(`^\d+x .+`)
	type served struct {
		requestID, offering, hardware string
		input, output                 int64
	}
	stream := func(tier catalog.Tier) served {
		t.Helper()
		const maxTokens = 16
		params := chatParams(model+":"+string(tier), maxTokens)
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		var res *http.Response
		s := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&res))
		var acc openai.ChatCompletionAccumulator
		usageChunks := 0
		for s.Next() {
			c := s.Current()
			if c.JSON.Usage.Valid() {
				usageChunks++
			}
			acc.AddChunk(c)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%s stream: %v", tier, err)
		}
		if len(acc.Choices) == 0 || acc.Choices[0].Message.Content == "" {
			t.Fatalf("%s stream: no text", tier)
		}
		if usageChunks != 1 || acc.Usage.CompletionTokens != maxTokens || acc.Usage.PromptTokens <= 0 {
			t.Fatalf("%s stream: %d usage chunks, usage %+v; want one, with %d completion tokens", tier, usageChunks, acc.Usage, maxTokens)
		}
		id, offering, gotTier := headersOf(t, res)
		want := offerings[tier]
		hw := res.Header.Get("X-GPUMarket-Hardware")
		if gotTier != string(tier) || offering != want.ID {
			t.Fatalf("%s stream: served in tier %q by offering %s, want the %s offering %s", tier, gotTier, offering, tier, want.ID)
		}
		if !hardwareHeader.MatchString(hw) || hw != hardwareOf(t, want) {
			t.Fatalf("%s stream: X-GPUMarket-Hardware %q, want %q", tier, hw, hardwareOf(t, want))
		}
		return served{requestID: id, offering: offering, hardware: hw, input: acc.Usage.PromptTokens, output: acc.Usage.CompletionTokens}
	}
	got := map[catalog.Tier]served{catalog.TierBatch: stream(catalog.TierBatch), catalog.TierRealtime: stream(catalog.TierRealtime)}
	// The batch request went to the rig with the lower ask, and different hardware.
	if batch.BlendedAsk() >= realtime.BlendedAsk() || got[catalog.TierBatch].hardware == got[catalog.TierRealtime].hardware {
		t.Errorf("batch served by %s at ask %s, realtime by %s at ask %s: want batch on the cheaper rig",
			got[catalog.TierBatch].hardware, batch.BlendedAsk(), got[catalog.TierRealtime].hardware, realtime.BlendedAsk())
	}

	// 3. Both requests are metered at their tier's price, and the balance falls by exactly
	// their sum.
	charges := map[catalog.Tier]money.Pico{}
	var total money.Pico
	for _, tier := range []catalog.Tier{catalog.TierBatch, catalog.TierRealtime} {
		s := got[tier]
		m := b.metered(t, s.requestID)
		if m.offering != s.offering || m.tier != string(tier) || m.input != s.input || m.output != s.output {
			t.Errorf("%s request %s metered as %+v; the stream said %d in, %d out from %s", tier, s.requestID, m, s.input, s.output, s.offering)
		}
		// The client read the stream to its end ([DONE]); the SDK then closes the response, as
		// OpenAI's SDKs do. That is a whole response, not a client that went away.
		if m.status != "ok" {
			t.Errorf("%s request %s, streamed to its end, metered with status %q, want ok", tier, s.requestID, m.status)
		}
		if want := b.price(t, string(tier), m.input, m.output); m.charge != want || m.charge <= 0 {
			t.Errorf("%s request charged %s, want %s", tier, m.charge, want)
		}
		charges[tier] = m.charge
		total += m.charge
	}
	if got[catalog.TierBatch].input == got[catalog.TierRealtime].input && charges[catalog.TierBatch] >= charges[catalog.TierRealtime] {
		t.Errorf("the same tokens cost %s in batch and %s in realtime: want batch cheaper", charges[catalog.TierBatch], charges[catalog.TierRealtime])
	}
	if bal := b.balance(t, dev.AccountID); bal != start-total {
		t.Errorf("balance %s after requests charged %s and %s; want %s", bal, charges[catalog.TierBatch], charges[catalog.TierRealtime], start-total)
	}

	// The usage page, in the same browser, lists both requests: tier, hardware, offering and
	// the cost, written as the page writes money (money.Pico.String).
	tab.open("/usage", http.StatusOK)
	if n := tab.count(byTestID("request")); n != 2 {
		t.Errorf("the usage page lists %d requests, want the 2 of this account", n)
	}
	for _, tier := range []catalog.Tier{catalog.TierBatch, catalog.TierRealtime} {
		s := got[tier]
		row := fmt.Sprintf(`%s[data-request-id=%q]`, byTestID("request"), s.requestID)
		if tab.count(row) != 1 {
			t.Errorf("request %s (%s) is not on the usage page", s.requestID, tier)
			continue
		}
		cell := func(id string) string { return tab.text(row + " " + byTestID(id)) }
		if v := cell("model"); v != model {
			t.Errorf("usage page: %s request's model %q, want %q", tier, v, model)
		}
		if v := cell("tier"); v != string(tier) {
			t.Errorf("usage page: %s request's tier %q", tier, v)
		}
		if v := cell("hardware"); v != s.hardware {
			t.Errorf("usage page: %s request's GPU %q, want %q as the header said", tier, v, s.hardware)
		}
		if v := tab.attr(row+" "+byTestID("hardware"), "title"); v != "offering "+s.offering {
			t.Errorf("usage page: %s request's offering %q, want %s", tier, v, s.offering)
		}
		if v := cell("status"); v != "ok" {
			t.Errorf("usage page: %s request, streamed to its end, has status %q, want ok", tier, v)
		}
		if v, want := cell("cost"), charges[tier].String(); v != want {
			t.Errorf("usage page: %s request's cost %q, want %q", tier, v, want)
		}
	}
}
