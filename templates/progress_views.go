package templates

// ProgressView is a piece of long work as its page shows it while it runs and after: a bar, what
// is done of how much, the recent pace and the time left (docs/progress.md). The same component
// is the page's and the fragment its script polls, so both always read alike.
type ProgressView struct {
	// TestID names the block for tests ("batch-progress", "close-progress-bar", ...).
	TestID string
	// Src is the address of this block alone, polled while the work runs; "" once it ended,
	// which stops the polling.
	Src     string
	Label   string // what the bar measures, for assistive technology: "Lines of batch_…"
	Status  string // the work's status in words, "" when the page shows it elsewhere
	Count   string // "10 of 40 lines done"
	Percent int
	Rate    string // "2.0 lines a minute", "" while unknown
	Left    string // "about 15 min left", "estimating…", "done"
	Note    string // what else the owner says: "3 failed"
}
