// Package billing holds credits bought through Stripe, with their checkout, webhooks and
// refunds (credits.go, stripe*.go, events_local.go), and two parts the /v1 gateway (package
// web/gateway) runs on: admission (admission.go, admission_rules.go), which holds each request
// to its account's balance and its key's monthly limit before it is sent, and the request log
// (requestlog.go), what the gateway saw of each request, reconciled with the meter's usage rows
// (docs/gateway-integrity.md). The ledger they post to and read is package ledger.
//
// Tables: billing owns credit_purchases, the Stripe event tables, admission_holds and
// gateway_requests; admission reads a customer's credit balance from ledger_accounts,
// api_key_spend and usage_event_keys, and the request log reads usage_events and
// usage_event_keys, which package metering writes.
package billing
