package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
)

// Label is how a page names an offering in a list of another package's rows, where its id
// would mean nothing to a person: its hardware, model and region, "4× RTX 4090 · llama-3.1-8b
// · Norway" (docs/page-text.md, "Names").
func Label(gpuSKU string, gpuCount int, model, region string) string {
	return fmt.Sprintf("%d× %s · %s · %s", gpuCount, ShortGPUName(gpuSKU), model, RegionName(region))
}

// ShortGPUName is a GPU model's name without its vendor's brands, "RTX 4090", "H100 SXM5 80GB";
// the SKU as given when no listed model has it.
func ShortGPUName(sku string) string {
	g, ok := GPUBySKU(sku)
	if !ok {
		return sku
	}
	return strings.TrimPrefix(strings.TrimPrefix(g.Name, "NVIDIA "), "GeForce ")
}

// LabelsByID names the offerings of ids, by id, whatever their status: what a list of
// another package's rows shows in place of each offering's id. An id of no offering is
// missing from the map.
func (s *Service) LabelsByID(ctx context.Context, ids []string) (_ map[string]string, err error) {
	defer services.Wrap(&err, "catalog.LabelsByID")
	out := map[string]string{}
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if services.CanonicalUUID(id) {
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text, gpu, gpu_count, model, region FROM offerings
		WHERE id = ANY ($1::text[]::uuid[])`, valid)
	if err != nil {
		return nil, err
	}
	var id, gpu, model, region string
	var count int
	_, err = pgx.ForEachRow(rows, []any{&id, &gpu, &count, &model, &region}, func() error {
		out[id] = Label(gpu, count, model, region)
		return nil
	})
	return out, err
}
