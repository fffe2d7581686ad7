package budgets

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/gpumarket/gpumarket/services/admission"
	"github.com/gpumarket/gpumarket/services/money"
	"github.com/gpumarket/gpumarket/services/periods"
)

// AdmissionLimits is what admission reads of the limits it enforces (admission.Limits), queued into the batch that
// reads an account's figures; the platform hands it to admission, which this package imports.
type AdmissionLimits struct{}

var _ admission.Limits = AdmissionLimits{}

// QueueLimited queues into b the read of whether the account has a member limit or a monthly budget, into limited.
func (AdmissionLimits) QueueLimited(b *pgx.Batch, accountID string, limited *bool) {
	b.Queue(`SELECT EXISTS (SELECT 1 FROM member_limits WHERE account_id = $1::uuid)
		OR EXISTS (SELECT 1 FROM account_budgets WHERE account_id = $1::uuid)`, accountID).QueryRow(func(row pgx.Row) error {
		return row.Scan(limited)
	})
}

// QueueLimits queues into b the read of the account's monthly budget and member limits, into limits.
func (AdmissionLimits) QueueLimits(b *pgx.Batch, accountID string, limits *admission.AccountLimits) {
	b.Queue(`SELECT NULL::text, limit_pico, 'month' FROM account_budgets WHERE account_id = $1::uuid
		UNION ALL
		SELECT user_id::text, limit_pico, period FROM member_limits WHERE account_id = $1::uuid`, accountID).Query(func(rows pgx.Rows) error {
		var user pgtype.Text
		var limit money.BigPico
		var period string
		_, err := pgx.ForEachRow(rows, []any{&user, &limit, &period}, func() error {
			if !user.Valid {
				l := limit
				limits.Budget = &l
				return nil
			}
			if limits.Members == nil {
				limits.Members = map[string]admission.MemberLimit{}
			}
			limits.Members[user.String] = admission.MemberLimit{Limit: limit, Period: periods.Period(period)}
			return nil
		})
		return err
	})
}
