package load

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes the result for a person to read: one figure or group of figures a line.
func (r Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{name}, args...)...)
	}

	arrivals := "all at once"
	if r.Rate > 0 {
		arrivals = fmt.Sprintf("Poisson at %g/s", r.Rate)
	}
	mode := "non-streaming"
	if r.Stream {
		mode = "streaming"
	}
	if r.Concurrency > 0 {
		arrivals += fmt.Sprintf(", at most %d in flight", r.Concurrency)
	}
	row("endpoint", "%s (model %s)", r.URL, r.Model)
	if r.Offering != "" {
		row("offering", "%s: %d answers from it, %d from elsewhere", r.Offering, r.FromOffering, r.NotFromOffering)
	}
	row("load", "%d requests, %s, %s, max_tokens %d", r.Requests, arrivals, mode, r.MaxTokens)
	outcome := fmt.Sprintf("%d ok, %d failed", r.Completed, r.Failed)
	if r.Sent < r.Requests {
		outcome += fmt.Sprintf(", %d not sent (stopped)", r.Requests-r.Sent)
	}
	row("requests", "%s", outcome)
	for _, f := range r.Failures {
		row("  "+f.Kind, "%d, e.g. %s", f.Count, oneLine(f.Example))
	}
	row("duration", "%.2f s", r.DurationS)
	row("throughput", "%.1f req/s; tokens/s: %.1f in, %.1f out, %.1f total", r.ReqS, r.InputTPS, r.OutputTPS, r.TotalTPS)
	row("tokens", "%d in, %d out", r.InputTokens, r.OutputTokens)
	if r.Stream {
		row("TTFT", "mean %s, p50 %s, p90 %s, p99 %s", msText(r.TTFTMeanMs), msText(r.TTFTP50Ms), msText(r.TTFTP90Ms), msText(r.TTFTP99Ms))
		row("TPOT", "p50 %s, p99 %s", msText(r.TPOTP50Ms), msText(r.TPOTP99Ms))
	} else {
		row("TTFT, TPOT", "not measured without streaming")
	}
	row("latency", "mean %s, p50 %s, p99 %s, max %s", msText(r.LatencyMeanMs), msText(r.LatencyP50Ms), msText(r.LatencyP99Ms), msText(r.LatencyMaxMs))
	row("client", "sent %.1f req/s; lag p50 %s, p99 %s, max %s; at most %d in flight",
		r.SendRate, msText(r.LagP50Ms), msText(r.LagP99Ms), msText(r.LagMaxMs), r.MaxInFlight)
	if r.USDPerHour > 0 {
		row("cost", "$%.4f per M total tokens, $%.4f per M output tokens at $%g/h ($%.4f this run)",
			r.USDPerMTotal, r.USDPerMOutput, r.USDPerHour, r.CostRunUSD)
	} else {
		row("cost", "give a price per hour (-usd-per-hour) for the cost per million tokens")
	}
	if p := r.Platform; p != nil {
		row("platform", "%s per M total tokens, %s per M output tokens at the %s tier's %s in, %s out (%s this run; computed from the catalog's price, not invoiced)",
			p.USDPerMTotal, p.USDPerMOutput, p.Tier, p.InputPrice, p.OutputPrice, p.ChargeUSD)
	}
	row("method", "%s, loadgen %s, started %s", r.Method, r.Version, r.StartedAt.Format(time.RFC3339))
	row("note", "%s", r.Note)
	return tw.Flush()
}

// msText shows milliseconds with three significant digits or more.
func msText(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.3f ms", v)
	case v < 100:
		return fmt.Sprintf("%.2f ms", v)
	default:
		return fmt.Sprintf("%.1f ms", v)
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
