package requestlog

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/services/catalog"
)

// Usage is what the request log reads of the meter's usage rows, to write an ended request's hold only while its
// request is not metered and to reconcile its records with what was metered. Package metering implements it
// (metering.GatewayReads) and imports this package, so the platform hands it in (NewRequestLog). A log without it
// writes the records of attempts that leave nothing held, and neither reconciles nor lists discrepancies.
type Usage interface {
	// Metered is the SQL condition that the request whose id is the SQL expression requestID is metered, for a
	// statement of this package that must tell metered requests from the others in its own snapshot.
	Metered(requestID string) string
	// MeteredTokens reads through q the input and output tokens the meter billed the metered requests of
	// requestIDs, by request id, each found through its key in its month's partition.
	MeteredTokens(ctx context.Context, q Querier, requestIDs []string) (map[string]Tokens, error)
	// MeteredUsage reads through q the usage rows of the requests of requestIDs, by request id; a request without
	// one is missing.
	MeteredUsage(ctx context.Context, q Querier, requestIDs []string) (map[string]MeteredUsage, error)
	// FlaggedByMeter reads through q the newest limit requests the meter flagged, the latest metered first.
	FlaggedByMeter(ctx context.Context, q Querier, limit int) ([]Flagged, error)
}

// MeteredUsage is a request's usage row as the reconciliation and the discrepancies compare it with the gateway's
// record.
type MeteredUsage struct {
	AccountID, APIKeyID, OfferingID string
	Tier                            catalog.Tier
	Model                           string
	// ReportedInput and ReportedOutput are the tokens the rig reported (nil in rows metered before the meter kept
	// them); Input and Output those the meter billed.
	ReportedInput, ReportedOutput *int64
	Input, Output                 int64
	ChargePico                    int64
	OccurredAt                    time.Time
	// Flag is the meter's flag, "" when it flagged nothing; FlagReason its reason, nil when none.
	Flag       string
	FlagReason *string
}

// Tokens are the input and output tokens the meter billed a request.
type Tokens struct {
	Input, Output int64
}

// Flagged is a request flagged for review, and when.
type Flagged struct {
	RequestID string
	At        time.Time
}
