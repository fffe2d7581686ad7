package admission

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// The recorded holds (admission_holds) as other packages write them: the meter deletes a request's hold in the
// transaction that bills it.

// ReleaseHolds deletes the holds of the requests of requestIDs through tx, the meter's transaction that posts their
// charges: a snapshot shows each request either held or charged (Admission).
func ReleaseHolds(ctx context.Context, tx pgx.Tx, requestIDs []string) (err error) {
	defer services.Wrap(&err, "admission.ReleaseHolds")
	_, err = tx.Exec(ctx, `DELETE FROM admission_holds WHERE request_id = ANY($1::text[])`, requestIDs)
	return err
}
