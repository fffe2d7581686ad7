// Package requestlog keeps the /v1 gateway's record of what it saw of each request
// (requestlog.go): its status, its timing and the usage its response reported, written in
// batches with the hold admission turned its reservation into, and reconciled with the meter's
// usage rows, so that a rig's answer and what was billed for it can be compared
// (docs/gateway-integrity.md). From the same record it counts each offering's outcomes for
// the reliability standings (reliability.go).
//
// An administrator marks a discrepancy resolved with a note (resolutions.go), recorded in the
// audit log in the same transaction.
//
// Tables: gateway_requests, discrepancy_resolutions. A request's hold goes to package admission's table through
// admission.QueueRecordHolds, in the batch that records the request; the meter's usage rows are
// read through Usage (metering.GatewayReads, handed in: package metering imports this one). It
// imports admission for the Hold and the usage it records, and services/reliability for the
// standings' types; neither the ledger nor credits.
package requestlog
