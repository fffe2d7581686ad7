package planner

import (
	"context"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/catalog"
)

// Catalog is what the planner reads of the catalog: the public listing and the prices in force.
type Catalog interface {
	List(ctx context.Context, in catalog.ListInput) ([]catalog.Offering, error)
	CurrentPrices(ctx context.Context) (map[catalog.Tier]catalog.Price, error)
}

var _ Catalog = (*catalog.Service)(nil)

// Service plans over the catalog as it stands.
type Service struct{ cat Catalog }

// NewService returns the planner over a catalog.
func NewService(cat Catalog) *Service { return &Service{cat: cat} }

// Plan recommends a mix for the workload from the public catalog (active offerings whose tier's
// price covers their asks) and the price book's prices in force.
func (s *Service) Plan(ctx context.Context, w Workload) (_ Plan, err error) {
	defer services.Wrap(&err, "planner.Plan")
	offerings, err := s.cat.List(ctx, catalog.ListInput{Model: w.Model})
	if err != nil {
		return Plan{}, err
	}
	prices, err := s.cat.CurrentPrices(ctx)
	if err != nil {
		return Plan{}, err
	}
	return PlanFleet(w, offerings, prices)
}
