package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/money"
)

// A $0 price is a slip unless it is marked free; marked free, it is taken; a change marked free
// with no $0 in it is refused as contradicting itself.
func TestZeroPriceOnlyMarkedFree(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	from := now.Add(24 * time.Hour)
	for _, tc := range []struct {
		name          string
		input, output money.MicroUSD
		free          bool
		wantFields    []string
	}{
		{"$0 input, not marked", 0, 300_000, false, []string{"input_usd_per_mtok"}},
		{"$0 output, not marked", 150_000, 0, false, []string{"output_usd_per_mtok"}},
		{"both $0, not marked", 0, 0, false, []string{"input_usd_per_mtok", "output_usd_per_mtok"}},
		{"both $0, free on purpose", 0, 0, true, nil},
		{"$0 input, free on purpose", 0, 300_000, true, nil},
		{"marked free with no $0 in it", 150_000, 300_000, true, []string{FieldFree}},
		{"a price of one micro-dollar is a price", 1, 1, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ScheduleInput{Tier: TierStandard, Input: tc.input, Output: tc.output, EffectiveFrom: from, Free: tc.free}.Validate(now)
			if len(tc.wantFields) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ae, ok := err.(*services.Error)
			if !ok || ae.Code != services.CodeInvalid || len(ae.Fields) != len(tc.wantFields) {
				t.Fatalf("error %v, want fields %v", err, tc.wantFields)
			}
			for _, f := range tc.wantFields {
				if !strings.Contains(ae.Fields[f], "ree on purpose") {
					t.Errorf("field %s: %q, want it to name the free box", f, ae.Fields[f])
				}
			}
		})
	}
}
