package templates

// BatchesPage is a developer's batches and the form to start one.
type BatchesPage struct {
	Page
	Form      Form
	Keys      []Option // the account's live API keys: a batch's lines go out with one
	Endpoints []Option
	Batches   []BatchRow
	// MaxUploadBytes is the largest file the page takes; larger ones go through POST /v1/files.
	MaxUploadBytes string
}

// BatchRow is a batch as its owner sees it on the page.
type BatchRow struct {
	ID       string
	Status   string
	Endpoint string
	Created  string
	// Progress is its lines' progress block, polled while the batch runs.
	Progress ProgressView
	Cost     string // what its metered lines cost, in cents: "$1,234.57"
	Estimate string // the bound it was admitted with, in cents
	Errors   []string
	InputID  string
	OutputID string // "" until it ends with answers
	ErrorID  string // "" unless some line failed
	// Cancellable says the batch is validating or in progress.
	Cancellable bool
}

// BatchDetailPage is one batch on a page of its own.
type BatchDetailPage struct {
	Page
	Batch BatchRow
}
