package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/batch"
	"github.com/gpumarket/gpumarket/services/budgets"
	"github.com/gpumarket/gpumarket/services/catalog"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/requestlog"
	"github.com/gpumarket/gpumarket/services/rigwire"
	"github.com/gpumarket/gpumarket/services/routing"
	"github.com/gpumarket/gpumarket/services/ticket"
	"github.com/gpumarket/gpumarket/web/gateway/apikeys"
	"github.com/gpumarket/gpumarket/web/gateway/batchapi"
	"github.com/gpumarket/gpumarket/web/gateway/batchload"
	"github.com/gpumarket/gpumarket/web/gateway/dialect"
	"github.com/gpumarket/gpumarket/web/gateway/internal/wire"
	"github.com/gpumarket/gpumarket/web/gateway/models"
	"github.com/gpumarket/gpumarket/web/gateway/preferences"
	"github.com/gpumarket/gpumarket/web/internal/httpx"
)

// The OpenAI-compatible gateway: POST /v1/chat/completions (streaming and not),
// /v1/completions, /v1/embeddings and GET /v1/models, for any OpenAI SDK pointed at
// <platform>/v1 with an API key.
//
// A request goes through, in order: the API key (Authorization: Bearer <key>; 401), the key's
// rate limit (429 with Retry-After), the body (400 for bad JSON or more than MaxBodyBytes), its
// tier and caps, routing (404 model_not_found, 503 when no offering can serve), admission
// (402 insufficient_quota when the balance or the key's monthly limit is spent), and then the
// candidates in routing's order (proxy.go). Each step's refusal is answered in OpenAI's
// error shape (errors.go).
//
// The tier comes from the first of: a model suffix (<model>:realtime, :standard or :batch), the
// X-GPUMarket-Tier header, the body object "gpumarket": {"tier", "max_price_per_mtok",
// "max_ttft_ms", "offering", "prefer", "hardware_class", "region", "max_gco2e_per_mtok"}, the
// key's default tier, else standard. OpenRouter's body object "provider" narrows and orders the
// offerings, and the conversation a request belongs to keeps it on one rig (package preferences). The
// suffix, the gpumarket and provider objects and session_id are taken out of the body before it
// goes to the rig.
//
// /v1 calls carry API keys, never sessions: they are served by this package's own router, which
// has no session middleware and no CSRF check (a request's cookies authenticate nothing here). API keys are looked up once per KeyCacheTTL; a key revoked or
// changed is forgotten by every gateway process as soon as word of it arrives (keychanges.go),
// and KeyCacheTTL bounds how stale it can be when that word is lost; when a key was last used
// is written in batches, every apikeys.TouchEvery.

// Defaults of Config.
const (
	DefaultKeyRatePerSecond = 50
	DefaultKeyRateBurst     = 100
	DefaultMaxBodyBytes     = 1 << 20
	DefaultKeyCacheTTL      = 5 * time.Second
	// TierHeader chooses the tier when the model names none.
	TierHeader = "X-GPUMarket-Tier"
)

// Config is what the /v1 endpoints need. With no Router, they authenticate and then answer
// 503: a process without routing wired.
type Config struct {
	// Accounts finds the API keys requests carry and records when they were last used.
	Accounts *accounts.Service
	// Batches are the Batch API's files and batches (package batchapi); nil answers them with 503.
	Batches *batch.Service
	Log     *slog.Logger     // nil means slog.Default()
	Now     func() time.Time // nil means time.Now
	// Middleware runs first on every request, as it does on the platform's other addresses: the
	// request id, the HTTP metrics, the access log, panic recovery and the security headers
	// (web.Server.EdgeMiddleware). Nil runs none.
	Middleware []echo.MiddlewareFunc
	// IPExtractor says where a request comes from (web.Server.IPExtractor); nil means the
	// connection's own address.
	IPExtractor echo.IPExtractor
	Router      Router
	Tickets     *ticket.Signer
	Admission   *admission.Admission
	// Budgets reads a key's spend in its period for GET /v1/key; nil answers 503 there.
	Budgets  *budgets.Service
	Requests *requestlog.RequestLog // what the gateway saw; also the admin's discrepancies
	// RatePerSecond and RateBurst are each key's token bucket; zero means the defaults.
	RatePerSecond float64
	RateBurst     int
	MaxBodyBytes  int64         // zero means DefaultMaxBodyBytes
	KeyCacheTTL   time.Duration // zero means DefaultKeyCacheTTL
	NewRequestID  func() string // nil means "req_" and 24 random hex digits
	// Rigs calls the rigs' agents over the connections they hold (*rigwire.Caller): the gateway never dials a
	// rig. Nil fails every attempt, as an unreachable rig does.
	Rigs RigCaller
}

// RigCaller sends one request to the rig serving an offering and returns its answer once the rig sent its
// head. An error is a failure of the rig before its first byte (the gateway fails over); the Body's Read
// returning an error other than io.EOF is an answer that broke off. The context's end cancels the call at the
// rig. *rigwire.Caller implements it.
type RigCaller interface {
	Call(ctx context.Context, providerID, offeringID, path string, header http.Header, body []byte) (*http.Response, error)
}

var _ RigCaller = (*rigwire.Caller)(nil)

// Router is what the gateway asks of routing. *routing.Router implements it.
type Router interface {
	Pick(routing.Request) ([]routing.Candidate, error)
	Begin(offeringID string) (end func())
	Failure(offeringID string)
	Success(offeringID string)
	Observe(offeringID string, o routing.Observation)
	// Served records the offering that answered a request of a conversation (routing.Request.Conversation).
	Served(conversation, offeringID string)
	Models() []routing.ModelTiers
	// Capacity is the requests an offering's rig serves at once by its last heartbeat (0: none).
	Capacity(offeringID string) int
}

var _ Router = (*routing.Router)(nil)

// Gateway is the /v1 handlers and their state: an http.Handler that serves /v1 and every
// address under it, and nothing else.
type Gateway struct {
	echo     *echo.Echo
	cfg      Config
	accounts *accounts.Service
	log      *slog.Logger
	now      func() time.Time
	keys     *apikeys.Cache
	// batchKeys are the keys batches' lines go out with, by account and key id (batches.go).
	batchKeys *apikeys.Cache
	// batchLoad is the batch lines in flight on each offering, which the admin's batch queue shows (BatchLoad).
	batchLoad batchload.Load
	limits    *apikeys.Limits
	touches   *apikeys.Touches
}

// New builds the gateway and its routes.
func New(cfg Config) *Gateway {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultKeyRatePerSecond
	}
	if cfg.RateBurst <= 0 {
		cfg.RateBurst = DefaultKeyRateBurst
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.KeyCacheTTL <= 0 {
		cfg.KeyCacheTTL = DefaultKeyCacheTTL
	}
	if cfg.NewRequestID == nil {
		cfg.NewRequestID = newRequestID
	}
	acc, log := cfg.Accounts, cfg.Log
	touchKeys := func(context.Context, map[string]time.Time) error { return nil }
	if acc != nil {
		touchKeys = acc.TouchKeys
	}
	g := &Gateway{
		cfg: cfg, accounts: acc, log: log, now: cfg.Now,
		keys:      apikeys.NewCache(cfg.KeyCacheTTL),
		batchKeys: apikeys.NewCache(cfg.KeyCacheTTL),
		limits:    apikeys.NewLimits(cfg.RatePerSecond, cfg.RateBurst),
		touches:   apikeys.NewTouches(touchKeys, log),
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	if cfg.IPExtractor != nil {
		e.IPExtractor = cfg.IPExtractor
	}
	e.HTTPErrorHandler = g.handleError
	e.Use(cfg.Middleware...)
	g.echo = e
	g.routes()
	(&batchapi.API{Batches: cfg.Batches, Admit: g.admitKey, ReadBody: readGatewayBody, WriteError: g.writeGatewayError}).Routes(e)
	return g
}

// Close ends the gateway's work in the background, once the HTTP server has finished the
// requests in flight: the scheduled write of when keys were last used is dropped (see
// apikeys.Touches) and admission's rereads end. Calling it again does nothing more.
func (g *Gateway) Close() {
	g.touches.Close()
	if g.cfg.Admission != nil {
		g.cfg.Admission.Close()
	}
}

// ServeHTTP makes the gateway an http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.echo.ServeHTTP(w, r) }

// Echo exposes the router for tests that list its routes.
func (g *Gateway) Echo() *echo.Echo { return g.echo }

func newRequestID() string { return services.NewTimeOrderedID("req_", time.Now()) }

// endpoint is one of the inference endpoints.
type endpoint struct {
	path    string
	streams bool // takes "stream" and "stream_options"
	output  bool // produces output tokens (embeddings do not)
	kind    ticket.Kind
	// dialect, when set, is the API the endpoint speaks, translated to and from chat completions (package dialect);
	// its rig is then called on chatEndpoint's path, unless its engine serves the dialect natively (native.go).
	dialect dialect.Dialect
}

// rigPath is the path the endpoint's rig is called on.
func (ep endpoint) rigPath() string {
	if ep.dialect != nil {
		return chatEndpoint.path
	}
	return ep.path
}

var (
	chatEndpoint       = endpoint{path: "/v1/chat/completions", streams: true, output: true}
	completionEndpoint = endpoint{path: "/v1/completions", streams: true, output: true}
	embeddingEndpoint  = endpoint{path: "/v1/embeddings", kind: ticket.KindEmbedding}
)

// routes registers the /v1 endpoints.
func (g *Gateway) routes() {
	e := g.echo
	e.POST(chatEndpoint.path, g.serve(chatEndpoint))
	e.POST(completionEndpoint.path, g.serve(completionEndpoint))
	e.POST(embeddingEndpoint.path, g.serve(embeddingEndpoint))
	e.POST(messagesEndpoint.path, g.serve(messagesEndpoint))
	e.POST("/v1/messages/count_tokens", g.countAnthropicTokens)
	e.POST("/v1/responses", g.serve(endpoint{path: "/v1/responses", streams: true, output: true, dialect: dialect.Responses{}}))
	e.GET("/v1/models", g.models)
	for _, path := range keyInfoPaths {
		e.GET(path, g.key)
	}
	e.RouteNotFound("/v1/*", g.notFound)
}

// serve answers an inference endpoint.
func (g *Gateway) serve(ep endpoint) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ep.dialect != nil {
			c.Set(dialectKey, ep.dialect)
		}
		key, err := g.admitKey(c)
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		body, err := readGatewayBody(c, g.cfg.MaxBodyBytes)
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		clientBody := body
		if ep.dialect != nil {
			if body, err = ep.dialect.ToChat(body); err != nil {
				return g.writeGatewayError(c, err)
			}
		}
		// The server's read and write timeouts bound a request's arrival, not an answer that a rig
		// may take minutes to generate and stream: past the body they are lifted, and the relay
		// bounds each write instead (httpx.DeadlineWriter). An expired read deadline would cancel the
		// request as if the client had gone.
		rc := http.NewResponseController(c.Response())
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		req, err := parseGatewayRequest(body, ep, c.Request().Header.Get(TierHeader), key)
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		req.clientBody = clientBody
		if ep.dialect != nil {
			if req.nativeBody, err = dialect.NativeBody(clientBody, req.route.Model); err != nil {
				return g.writeGatewayError(c, err)
			}
			req.nativeHeader = http.Header{}
			for _, name := range anthropicHeaders {
				if v := c.Request().Header.Get(name); v != "" && ep.nativeAPI() == catalog.NativeMessages {
					req.nativeHeader[name] = []string{v}
				}
			}
			// The route ticket bounds the input by the body the rig gets, whichever it is (native.go).
			req.bounds.MaxInputTokens = max(req.bounds.MaxInputTokens, int64(len(req.nativeBody))+routing.InputAllowance)
		}
		if session := c.Request().Header.Get(SessionHeader); session != "" { // before the body's (package preferences)
			req.route.Conversation, req.route.ConversationStarts = preferences.ConversationOf(nil, ep.rigPath(), ep.output, session, key.AccountID, req.route.Model)
		}
		if batchLineOf(c.Request().Context()) != nil {
			req.route.Tier = catalog.TierBatch // a batch's line runs at the batch tier, whatever it names (batches.go)
		}
		if g.cfg.Router == nil {
			return g.writeGatewayError(c, services.Errorf(services.CodeUnavailable, "The gateway does not run in this process."))
		}
		candidates, err := g.cfg.Router.Pick(req.route)
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		res, err := g.cfg.Admission.Admit(c.Request().Context(), admission.AdmitInput{
			AccountID: key.AccountID, APIKeyID: key.ID, KeyLimit: key.Limit, KeyPeriod: key.LimitPeriod, CreatedBy: key.CreatedBy, Tier: req.route.Tier,
			MaxInputTokens: req.bounds.MaxInputTokens, MaxOutputTokens: req.bounds.MaxOutputTokens,
			Price: dearestPrice(candidates),
		})
		if err != nil {
			return g.writeGatewayError(c, err)
		}
		return g.forward(c, key, req, candidates, res)
	}
}

// dearestPrice is the highest input and output prices among the candidates, which admission holds
// the request's bound at: the candidates of a request serve one model in one tier and carry its
// price, but a bound is never underestimated.
func dearestPrice(cs []routing.Candidate) *catalog.Price {
	if len(cs) == 0 {
		return nil
	}
	p := catalog.Price{ID: cs[0].PriceID, Tier: cs[0].Tier, Input: cs[0].PriceInput, Output: cs[0].PriceOutput}
	for _, c := range cs[1:] {
		p.Input, p.Output = max(p.Input, c.PriceInput), max(p.Output, c.PriceOutput)
	}
	return &p
}

// admitKey authenticates the API key and takes a token from its bucket.
func (g *Gateway) admitKey(c echo.Context) (accounts.APIKey, error) {
	if line := batchLineOf(c.Request().Context()); line != nil {
		return g.batchKey(c.Request().Context(), line)
	}
	secret := httpx.BearerToken(c.Request())
	if secret == "" {
		secret = strings.TrimSpace(c.Request().Header.Get("X-Api-Key")) // as Anthropic's clients send it
	}
	if secret == "" {
		return accounts.APIKey{}, services.Errorf(services.CodeUnauthorized, "No API key.")
	}
	now := g.now()
	key, err := g.keys.Lookup(c.Request().Context(), secret, now, g.accounts.KeyBySecret)
	if err != nil {
		return accounts.APIKey{}, err
	}
	if wait := g.limits.Take(key.ID, now); wait > 0 {
		ge := wire.New(services.CodeRateLimited, "rate_limit_exceeded", "",
			"Rate limit reached for this API key. Retry after the time in the Retry-After header.")
		ge.RetryAfter = wait
		return accounts.APIKey{}, ge
	}
	g.touches.Touch(key.ID, now)
	return key, nil
}

// readGatewayBody reads the request body, refusing more than limit bytes.
func readGatewayBody(c echo.Context, limit int64) ([]byte, error) {
	r := c.Request()
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, wire.InvalidRequest("", "request_too_large", "The request body is larger than %d bytes.", limit)
	case err != nil:
		return nil, wire.InvalidRequest("", "", "The request body could not be read.")
	}
	return buf.Bytes(), nil
}

// gatewayRequest is an inference request as the gateway forwards it.
type gatewayRequest struct {
	ep     endpoint
	route  routing.Request // the model without its tier suffix, the tier, the caps
	stream bool
	// forcedUsage says the gateway asked the rig for the usage chunk of a stream for its own
	// record: the client did not ask for it and does not get it.
	forcedUsage bool
	body        []byte // what goes to the rig
	clientBody  []byte // the body as the client sent it, before a dialect's translation
	// nativeBody is a dialect request's body as a rig whose engine serves the dialect gets it (native.go).
	nativeBody []byte
	// nativeHeader holds the client's headers of its dialect that go with a native body (anthropicHeaders).
	nativeHeader http.Header
	// bounds are the billable tokens the route ticket allows (routing.BoundsFor).
	bounds routing.Bounds
}

// SessionHeader names the conversation a request belongs to, as the body's session_id does
// (preferences.ConversationOf).
const SessionHeader = "X-Session-Id"

// gatewayOptions is the body object "gpumarket".
type gatewayOptions struct {
	Tier            catalog.Tier    `json:"tier"`
	MaxPricePerMTok json.RawMessage `json:"max_price_per_mtok"` // dollars, a number or a string
	MaxTTFTMillis   float64         `json:"max_ttft_ms"`
	Offering        string          `json:"offering"`
	// Prefer "carbon" asks for the lowest-carbon offering that keeps the tier's promise and the caps
	// (routing.Request.PreferCarbon); "price", the default, for the cheapest.
	Prefer string `json:"prefer"`
	// gpumarket's own provider preferences.
	preferences.Options
}

// parseGatewayRequest reads what the gateway needs of a body and rewrites the body for the rig
// when it must: without the tier suffix and the gpumarket object, with the stream's usage
// asked for. An untouched body goes out as it came.
func parseGatewayRequest(body []byte, ep endpoint, headerTier string, key accounts.APIKey) (*gatewayRequest, error) {
	top, ok := wire.ReadObject(body)
	if !ok {
		return nil, wire.InvalidRequest("", "invalid_json", "We could not parse the JSON body of your request: send a JSON object.")
	}
	// A body the gateway must rewrite is rewritten from its members as a map.
	var edits map[string]json.RawMessage
	edit := func() map[string]json.RawMessage {
		if edits == nil {
			edits = top.Members()
		}
		return edits
	}
	req := &gatewayRequest{ep: ep, body: body}
	rawModel, _ := top.Get("model")
	model, ok := wire.String(rawModel)
	if !ok || model == "" {
		return nil, wire.InvalidRequest("model", "", "You must provide a model parameter; GET /v1/models lists the models on offer.")
	}
	rewrite := false
	ask := routing.Ask{Model: model, KeyTier: catalog.Tier(key.DefaultTier), KeyPrefersCarbon: key.PreferCarbon}
	if headerTier != "" {
		if ask.HeaderTier = catalog.Tier(strings.ToLower(strings.TrimSpace(headerTier))); !ask.HeaderTier.Valid() {
			if _, suffix := routing.SplitModelTier(model); suffix == "" {
				return nil, wire.InvalidRequest(TierHeader, "invalid_tier", "%s must be realtime, standard or batch.", TierHeader)
			}
			ask.HeaderTier = "" // the model's suffix chooses the tier: the header is not read
		}
	}
	if raw, ok := top.Get("gpumarket"); ok {
		delete(edit(), "gpumarket")
		rewrite = true
		if string(raw) != "null" {
			if err := readGatewayOptions(raw, &ask); err != nil {
				return nil, err
			}
		}
	}
	preferGiven := ask.PreferCarbon != nil
	// OpenRouter's provider object (package preferences); session_id names a conversation, for the gateway alone.
	if raw, ok := top.Get("provider"); ok {
		delete(edit(), "provider")
		rewrite = true
		if string(raw) != "null" {
			requireParameters, err := preferences.ReadProvider(raw, &ask)
			if err != nil {
				return nil, err
			}
			if requireParameters {
				if err := preferences.RequireKnownParameters(top, ep.path, ep.rigPath()); err != nil {
					return nil, err
				}
			}
		}
	}
	if _, ok := top.Get("session_id"); ok {
		delete(edit(), "session_id")
		rewrite = true
	}
	// The tier: suffix, header, body object, the key's default, standard (routing.RequestFor).
	req.route = routing.RequestFor(ask)
	if req.route.Model != model {
		model, rewrite = req.route.Model, true // the tier suffix is taken out
	}
	if err := preferences.Check(req.route, preferGiven); err != nil {
		return nil, err
	}
	req.route.Conversation, req.route.ConversationStarts = preferences.ConversationOf(top, ep.rigPath(), ep.output, "", key.AccountID, req.route.Model)

	if ep.streams {
		if raw, ok := top.Get("stream"); ok && json.Unmarshal(raw, &req.stream) != nil {
			return nil, wire.InvalidRequest("stream", "", "stream must be true or false.")
		}
	}
	if req.stream {
		options := map[string]json.RawMessage{}
		if raw, ok := top.Get("stream_options"); ok && string(raw) != "null" {
			if json.Unmarshal(raw, &options) != nil || options == nil {
				return nil, wire.InvalidRequest("stream_options", "", "stream_options must be an object.")
			}
		}
		var asked bool
		if json.Unmarshal(options["include_usage"], &asked) != nil || !asked {
			options["include_usage"] = json.RawMessage("true")
			raw, err := wire.MarshalMembers(options)
			if err != nil {
				return nil, err
			}
			edit()["stream_options"], req.forcedUsage, rewrite = raw, true, true
		}
	}
	limit, choices, err := outputLimit(top, ep)
	if err != nil {
		return nil, err
	}
	if rewrite {
		members := edit()
		if members["model"], err = json.Marshal(model); err != nil {
			return nil, err
		}
		if req.body, err = wire.MarshalMembers(members); err != nil {
			return nil, err
		}
	}
	req.bounds = routing.BoundsFor(model, len(req.body), limit, choices, ep.output)
	return req, nil
}

// readGatewayOptions reads the body object "gpumarket" into the ask, refusing a field it does
// not know or a value it cannot take, beside the field's name.
func readGatewayOptions(raw json.RawMessage, ask *routing.Ask) error {
	var opts gatewayOptions
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&opts); err != nil {
		return wire.InvalidRequest("gpumarket", "invalid_gpumarket_options",
			`The "gpumarket" object takes tier, max_price_per_mtok, max_ttft_ms, offering, prefer, hardware_class, region and max_gco2e_per_mtok: %v.`, err)
	}
	if opts.Tier != "" && !opts.Tier.Valid() {
		return wire.InvalidRequest("gpumarket.tier", "invalid_tier", "gpumarket.tier must be realtime, standard or batch.")
	}
	ask.BodyTier = opts.Tier
	if len(opts.MaxPricePerMTok) > 0 && string(opts.MaxPricePerMTok) != "null" {
		p, err := money.ParseMicroUSD(strings.Trim(string(opts.MaxPricePerMTok), `"`))
		if err != nil {
			return wire.InvalidRequest("gpumarket.max_price_per_mtok", "invalid_price",
				"gpumarket.max_price_per_mtok is dollars per million tokens, like 0.15: %v.", err)
		}
		ask.MaxPricePerMTok = p
	}
	if math.IsNaN(opts.MaxTTFTMillis) || math.IsInf(opts.MaxTTFTMillis, 0) {
		return wire.InvalidRequest("gpumarket.max_ttft_ms", "", "gpumarket.max_ttft_ms is a number of milliseconds.")
	}
	ask.MaxTTFTMillis, ask.Offering = opts.MaxTTFTMillis, opts.Offering
	switch opts.Prefer {
	case "":
	case "price", "carbon":
		carbon := opts.Prefer == "carbon"
		ask.PreferCarbon = &carbon
	default:
		return wire.InvalidRequest("gpumarket.prefer", "invalid_prefer", `gpumarket.prefer must be "carbon" or "price".`)
	}
	return preferences.Read(opts.Options, ask)
}

// outputLimit reads the most output tokens each choice of a request asks for, max_completion_tokens (else
// max_tokens), nil when it sets none, and its choices, n.
func outputLimit(top wire.Object, ep endpoint) (limit *int64, choices int64, err error) {
	choices = 1
	if !ep.output {
		return nil, choices, nil
	}
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		raw, ok := top.Get(name)
		if !ok || string(raw) == "null" {
			continue
		}
		var v int64
		if json.Unmarshal(raw, &v) != nil || v < 0 {
			return nil, 0, wire.InvalidRequest(name, "", "%s must be a whole number of tokens, 0 or more.", name)
		}
		limit = &v
		break
	}
	if raw, ok := top.Get("n"); ok && string(raw) != "null" {
		if json.Unmarshal(raw, &choices) != nil || choices < 1 || choices > routing.MaxChoices {
			return nil, 0, wire.InvalidRequest("n", "", "n must be a whole number from 1 to %d.", routing.MaxChoices)
		}
	}
	return limit, choices, nil
}

// models lists the models on offer: each by its name, which routes to standard or the key's
// default tier, and as <model>:<tier> for each tier it is offered in, each with the price of the
// model in the tier its requests are routed in (its own row of the price book, else the tier's
// default).
func (g *Gateway) models(c echo.Context) error {
	key, err := g.admitKey(c)
	if err != nil {
		return g.writeGatewayError(c, err)
	}
	if g.cfg.Router == nil {
		return g.writeGatewayError(c, services.Errorf(services.CodeUnavailable, "The gateway does not run in this process."))
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": models.Entries(g.cfg.Router.Models(), catalog.Tier(key.DefaultTier))})
}
