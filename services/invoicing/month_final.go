package invoicing

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// MonthNotFinal says, in tx, why the month's documents are not all final: its close has not run to the end, or
// some of its invoices or statements are still drafts; "" when every document that reads the month's usage is
// final. The usage retention (package usagestore) drops a month's usage rows only then.
func MonthNotFinal(ctx context.Context, tx pgx.Tx, month time.Time) (_ string, err error) {
	defer services.Wrap(&err, "invoicing.MonthNotFinal(%s)", month.Format("2006-01"))
	var closeStatus string
	var draftInvoices, draftStatements int64
	if err := tx.QueryRow(ctx, `
		SELECT coalesce((SELECT status FROM invoice_closes WHERE period = $1::date), ''),
			(SELECT count(*) FROM invoices WHERE period = $1::date AND status = 'draft'),
			(SELECT count(*) FROM statements WHERE period = $1::date AND status = 'draft')`,
		month.Format("2006-01-02")).Scan(&closeStatus, &draftInvoices, &draftStatements); err != nil {
		return "", err
	}
	switch {
	case closeStatus != "done":
		return "not invoiced: the month's close has not run to the end", nil
	case draftInvoices > 0 || draftStatements > 0:
		return fmt.Sprintf("not invoiced: %d invoices and %d statements of the month are still drafts", draftInvoices, draftStatements), nil
	}
	return "", nil
}
