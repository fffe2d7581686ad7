// Package billing holds two parts the /v1 gateway (package web/gateway) runs on: admission
// (admission.go, admission_rules.go), which holds each request to its account's balance and
// its key's monthly limit before it is sent, and the request log (requestlog.go,
// reliability.go), what the gateway saw of each request, reconciled with the meter's usage
// rows (docs/gateway-integrity.md). The ledger is package ledger and prepaid credit package
// credits.
//
// Tables: billing owns admission_holds and gateway_requests; admission reads a customer's
// credit balance from ledger_accounts, api_key_spend and usage_event_keys, and the request log
// reads usage_events and usage_event_keys, which package metering writes.
package billing
