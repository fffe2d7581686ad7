// Package admission decides, for the /v1 gateway (package web/gateway), whether a request may
// start spending: it holds each request to its account's credit balance, its API key's limit
// per day, week or month, its creator's member limit and the account's monthly budget before it
// is sent (admission.go), and its rules say what an ended request
// settles to and what a refusal tells the caller (admission_rules.go). An ended request's
// reservation becomes a Hold, which the request log writes and the meter releases
// (docs/gateway-integrity.md).
//
// Tables: admission_holds, which it reads here and which the request log writes and the meter
// deletes from; it reads a customer's balance from ledger_accounts (owned by package ledger)
// and api_key_spend, api_key_spend_days and usage_event_keys (owned by package metering), in one
// statement so from one snapshot; an account's member_limits and account_budgets (package
// budgets) with the creators of its api_keys (package accounts) in a second, only when it has
// one. It imports services, catalog, money, ticket and usage: nothing of ledger,
// credits or the request log, which imports it.
package admission
