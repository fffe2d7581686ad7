// Package metering is the meter: it pulls usage events from the stream, judges them, prices
// them and bills each request exactly once, and it reads usage back for the usage pages,
// the reports and the live feed routing keeps its figures with.
//
// The usage event itself, the contract between the provider's gpuagent and the meter, lives
// in package usage (services/usage, with CONTRACT.md), and the platform's code names it
// there: usage.UsageEvent, usage.Decode.
//
// The files, by job: meter.go is the pipeline (consume, collect, check, commit, acknowledge);
// checks.go judges each message against the contract; references.go reads what a batch is
// judged against; pricing.go and bounds.go decide what each event is billed; store.go writes the
// usage rows and rollups in the batch's transaction (usage_copy.go is its fast path, and copy_binary.go writes its rows in COPY's binary form) and
// ledger.go the postings; batch_costs.go sums batch lines' charges; results.go is what a
// committed batch did; rejections.go and rejection_samples.go keep what was refused; usage.go
// reads usage back; feed.go carries stored usage to routing. What other packages read of the
// meter's tables is theirs to ask for here: gateway_reads.go (admission and the request log,
// handed in as GatewayReads), batch_reads.go (batches), forinvoicing.go and excess.go (the
// close), partitions.go (the usage store's months), and bulk.go, the rows benchmarks and data
// loads write by COPY and the sums they are checked by.
//
// Tables: the meter writes usage_events, usage_event_keys, usage_hourly, api_key_spend,
// usage_by_batch and the rejection tables, and posts to the ledger through package ledger's
// Ledger, in its own transaction, releasing there the admission holds of the requests it bills
// (admission.ReleaseHolds); it reads the offerings, accounts, prices and the gateway's records
// it judges a batch by through their owners' functions, queued in its batch.
package metering
