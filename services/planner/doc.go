// Package planner answers two questions a customer asks before moving traffic: what mix of
// tiers serves a workload, at what cost, energy and carbon, and what it saves against serving
// everything in the realtime tier (PlanFleet, over the catalog as it stands); and at what load
// each GPU configuration of the public benchmark is at its best (SweetSpots, over the
// benchmark's own runs). docs/planner-and-carbon-routing.md states the rules.
//
// Money is exact (money.Pico, a day's tokens times micro-dollars per million tokens); energy
// and carbon are estimates in float64, by the method of package carbon.
package planner
