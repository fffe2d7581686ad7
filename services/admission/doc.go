// Package admission decides, for the /v1 gateway (package web/gateway), whether a request may
// start spending: it holds each request to its account's credit balance, its API key's limit
// per day, week or month, its creator's member limit and the account's monthly budget before it
// is sent (admission.go), and its rules say what an ended request
// settles to and what a refusal tells the caller (admission_rules.go). An ended request's
// reservation becomes a Hold, which the request log writes and the meter releases
// (docs/gateway-integrity.md).
//
// Tables: admission_holds, its own, which the request log writes (QueueRecordHolds,
// DeleteExpiredHolds) and the meter deletes from (ReleaseHolds). An account's figures are read
// in one batch, one round trip in one read-only repeatable-read transaction, so from one
// snapshot: its holds here, with the reads the owners of the other tables queue into the batch,
// a customer's balance from package ledger (QueueCustomerCredit), the keys' spend and which
// requests are metered from package metering (Usage), whether it has a member limit or a budget
// from package budgets (Limits), and the creators of its keys from package accounts; its member
// limits and monthly budget, with the spend and holds of its keys, in a second batch, only when
// it has one. Packages metering and budgets import this one, so their reads are handed in
// (AdmissionConfig). It imports services, accounts, catalog, ledger, money, periods, ticket and
// usage: nothing of credits or the request log, which imports it.
package admission
