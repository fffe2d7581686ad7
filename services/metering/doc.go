// Package metering is the meter: it pulls usage events from the stream, judges them, prices
// them and bills each request exactly once, and it reads usage back for the usage pages,
// the reports and the live feed routing keeps its figures with.
//
// The usage event itself, the contract between the provider's gpuagent and the meter, lives
// in package usage (services/usage, with CONTRACT.md), and the platform's code names it
// there: usage.UsageEvent, usage.Decode.
package metering
