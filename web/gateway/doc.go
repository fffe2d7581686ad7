// Package gateway is the platform's OpenAI-compatible /v1 gateway: the inference endpoints
// (POST /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, GET /v1/models)
// and the Batch API's files and batches, for any OpenAI SDK pointed at <platform>/v1 with an
// API key.
//
// It is an http.Handler of its own (Gateway, built by New from a Config that names every
// dependency), with its own router: a /v1 request never reaches package web, so the pages'
// session lookup and CSRF check never run on it, and the pages know nothing of /v1.
// cmd/gpumarket mounts both on one address (Mount): /v1 and every address under it here, the
// rest to web. A process that runs the web role without the gateway role answers /v1 with 503
// (NotRunning). See docs/gateway.md.
//
// The files:
//
//   - gateway.go: Config, New, the routes, and a request's way in: the API key (with its cache
//     and its rate limit), the body, the tier and caps (routing.RequestFor), the route ticket's
//     bounds (routing.BoundsFor), routing and admission (billing.Admission).
//   - proxy.go: the attempts at the candidates routing chose, the relay of the answer, what
//     the gateway records of each attempt, and the settlement of the request's reservation
//     (billing.SettlementOf). Rigs are called through Config.Rigs (package rigwire, over NATS).
//   - provider.go: OpenRouter's "provider" object and gpumarket's own preferences
//     (routing.Preferences), require_parameters, and the conversation a request belongs to, which
//     routing keeps on one rig.
//   - jsonobject.go: a JSON object's top-level members, read in one pass without a map: the
//     request's members the gateway needs, and a whole answer's usage.
//   - errors.go: OpenAI's error shape, the one place that maps errors to statuses here.
//   - dialect.go: APIs served by translation to and from chat completions.
//   - native.go: the same APIs passed through untouched to rigs whose engine serves them, with the usage
//     of their native answers.
//   - anthropic.go: the Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens).
//   - responses.go: the OpenAI Responses API, /v1/responses, stateless, translated to and from chat
//     completions (dialect.go's hook).
//   - carbon.go: the X-GPUMarket-Gco2e headers and trailer.
//   - keychanges.go: forgetting a revoked or changed key (ForgetKey).
//   - batches.go: the Batch API's /v1/files and /v1/batches, and Send, through which the batch
//     scheduler (package batch) runs each line in process.
//   - batchload.go: the batch lines in flight on each offering, for the admin's queue.
//   - mount.go: Mount and NotRunning.
package gateway
