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
//     and its rate limit, package apikeys), the body, the tier and caps (routing.RequestFor), the
//     route ticket's bounds (routing.BoundsFor), routing and admission (admission.Admission); and
//     GET /v1/models (package models).
//   - proxy.go: the attempts at the candidates routing chose, the relay of the answer, what
//     the gateway records of each attempt, and the settlement of the request's reservation
//     (admission.SettlementOf). Rigs are called through Config.Rigs (package rigwire, over NATS).
//   - errors.go: the gateway's errors answered in OpenAI's shape or the request's dialect's, with
//     the code wire.Describe gives each (the one place that says which); each code's status and
//     types are the one table's in web/internal/httperr, which the pages read too.
//   - dialect.go: the relay of answers translated into the request's dialect (package dialect),
//     and the Anthropic Messages API's endpoints (POST /v1/messages, /v1/messages/count_tokens).
//   - native.go: the same APIs passed through untouched to rigs whose engine serves them, and the
//     relay of their native answers.
//   - cost.go: what a request cost, which its answer's usage carries.
//   - carbon.go: the X-GPUMarket-Gco2e headers and trailer.
//   - keychanges.go: forgetting a revoked or changed key (ForgetKey).
//   - batches.go: Send, through which the batch scheduler (package batch) runs each line in
//     process.
//   - batchload.go: the batch lines in flight on each offering, for the admin's queue (package
//     batchload counts them).
//   - probe.go: a probe of an offering that gets no streamed request, sent as a customer's request
//     goes; when to probe and how the answer is judged are package probes'.
//   - keyinfo.go: GET /v1/key, a key's own limit and spend (package keyinfo shapes the answer).
//   - mount.go: Mount and NotRunning.
//
// The packages under it, which it imports and which never import it:
//
//   - dialect: the APIs served by translation to and from chat completions, the Anthropic
//     Messages API and the OpenAI Responses API (/v1/responses, stateless), and the body and
//     usage of their native answers.
//   - preferences: OpenRouter's "provider" object and gpumarket's own preferences
//     (routing.Preferences), require_parameters, and the conversation a request belongs to,
//     which routing keeps on one rig.
//   - batchapi: the Batch API's /v1/files and /v1/batches.
//   - apikeys: the keys read by secret, each key's rate limit, and when each was last used.
//   - models: the entries of GET /v1/models.
//   - probes: when the offerings are probed (Run), a probe's request, and the judgement of its answer.
//   - keyinfo: what a key reads of itself at GET /v1/key.
//   - batchload: the count of batch lines in flight on each offering.
//   - internal/wire: what they share: the gateway's error and the code of each error the gateway
//     meets (Describe), OpenAI's error body, a JSON object's top-level members read in one pass
//     without a map, and an answer's usage with its cost.
package gateway
