package catalog

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpumarket/gpumarket/services"
	"github.com/gpumarket/gpumarket/services/accounts"
	"github.com/gpumarket/gpumarket/services/audit"
	"github.com/gpumarket/gpumarket/services/money"
)

// Price is what a customer pays per million tokens in a tier, from a date on: one row of the
// price book, which a route ticket names by ID. A row with a Model prices that model's requests in
// its tier; a row without one is the tier's default, for every model without a row of its own.
type Price struct {
	ID            int64          `json:"id"`
	Tier          Tier           `json:"tier"`
	Model         string         `json:"model,omitempty"`
	Input         money.MicroUSD `json:"input_usd_per_mtok"`
	Output        money.MicroUSD `json:"output_usd_per_mtok"`
	EffectiveFrom time.Time      `json:"effective_from"`
	// CachedInput is the price of an input token the engine served from its prompt cache
	// (docs/metering-integrity.md, "Cached input tokens"): at most Input, a quarter of it
	// unless the change that made the row said otherwise.
	CachedInput money.MicroUSD `json:"cached_input_usd_per_mtok"`
}

// DefaultCachedInput is the cached input price a row of the price book takes when none is
// given: a quarter of its input price, rounded down (the database's default too).
func DefaultCachedInput(input money.MicroUSD) money.MicroUSD { return input / 4 }

// DefaultPrices is the price book a new platform starts with. Realtime sits above the
// enterprise asks it routes to (about $0.17-0.31 per million at the benchmark's load);
// standard and batch sit above the consumer clusters' asks ($0.03-0.15).
var DefaultPrices = []Price{
	{Tier: TierRealtime, Input: 300_000, Output: 600_000, CachedInput: 75_000},
	{Tier: TierStandard, Input: 150_000, Output: 300_000, CachedInput: 37_500},
	{Tier: TierBatch, Input: 80_000, Output: 160_000, CachedInput: 20_000},
}

// PricesAt returns, per tier, the tier's default price in force at t: the latest row without a
// model effective at or before t. A model with rows of its own is priced by ModelPricesAt.
func (s *Service) PricesAt(ctx context.Context, t time.Time) (map[Tier]Price, error) {
	return s.ModelPricesAt(ctx, "", t)
}

// ModelPricesAt returns, per tier, the price of the model's requests in force at t
// (PriceBook.At): the model's own row if it has one in force, else the tier's default.
func (s *Service) ModelPricesAt(ctx context.Context, model string, t time.Time) (_ map[Tier]Price, err error) {
	defer services.Wrap(&err, "catalog.ModelPricesAt(%s)", model)
	book, err := s.PriceBook(ctx)
	if err != nil {
		return nil, err
	}
	return book.ForModel(model, t), nil
}

func scanPrice(r pgx.CollectableRow) (Price, error) {
	var p Price
	var in, out, cached int64
	var model *string
	err := r.Scan(&p.ID, &p.Tier, &model, &in, &out, &p.EffectiveFrom, &cached)
	p.Input, p.Output, p.CachedInput = money.MicroUSD(in), money.MicroUSD(out), money.MicroUSD(cached)
	if model != nil {
		p.Model = *model
	}
	return p, err
}

// priceColumns are the columns scanPrice reads, in its order.
const priceColumns = `id, tier, model, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, cached_input_micro_usd_per_mtok`

// PriceBook is the whole price book: every tier's rows, the defaults and the models' own, oldest
// first.
type PriceBook map[Tier][]Price

// At returns the price of the model's requests in the tier in force at t: the latest row of the
// model effective at or before t, else, when the model has none in force yet, the latest default
// row of the tier effective at or before t. A model's row stays in force until a later row of the
// same model replaces it; a change of the tier's default does not touch it. The empty model asks
// for the tier's default.
func (b PriceBook) At(tier Tier, model string, t time.Time) (Price, bool) {
	rows := b[tier]
	i := sort.Search(len(rows), func(i int) bool { return rows[i].EffectiveFrom.After(t) })
	var def *Price
	for j := i - 1; j >= 0; j-- {
		switch rows[j].Model {
		case model:
			return rows[j], true
		case "":
			if def == nil {
				def = &rows[j]
			}
		}
	}
	if def == nil {
		return Price{}, false
	}
	return *def, true
}

// ForModel returns, per tier, the price of the model's requests in force at t (At); a tier
// without any price in force is left out.
func (b PriceBook) ForModel(model string, t time.Time) map[Tier]Price {
	out := make(map[Tier]Price, len(b))
	for tier := range b {
		if p, ok := b.At(tier, model, t); ok {
			out[tier] = p
		}
	}
	return out
}

// ModelsAt lists, per tier, the prices of the models with a row of their own in force at t, by
// model; the tiers' defaults are not in it.
func (b PriceBook) ModelsAt(t time.Time) map[Tier]map[string]Price {
	out := map[Tier]map[string]Price{}
	for tier, rows := range b {
		for _, p := range rows {
			if p.Model == "" || p.EffectiveFrom.After(t) {
				continue
			}
			if out[tier] == nil {
				out[tier] = map[string]Price{}
			}
			out[tier][p.Model] = p // rows are oldest first: the latest in force wins
		}
	}
	return out
}

// PriceBook returns every row of the price book, past, in force and scheduled, so that whoever
// holds it can tell the price in force at any instant without asking again: routing does, and a
// scheduled change takes effect there at its moment.
func (s *Service) PriceBook(ctx context.Context) (_ PriceBook, err error) {
	defer services.Wrap(&err, "catalog.PriceBook")
	return ReadPriceBook(ctx, s.pool)
}

// CurrentPrices is PricesAt now: the tiers' defaults in force.
func (s *Service) CurrentPrices(ctx context.Context) (map[Tier]Price, error) {
	return s.PricesAt(ctx, s.now())
}

// CurrentModelPrices is ModelPricesAt now.
func (s *Service) CurrentModelPrices(ctx context.Context, model string) (map[Tier]Price, error) {
	return s.ModelPricesAt(ctx, model, s.now())
}

// EnsureDefaultPrices gives every tier that has no price in force at effectiveFrom its default,
// effective from effectiveFrom (EnsurePrices).
func (s *Service) EnsureDefaultPrices(ctx context.Context, effectiveFrom time.Time) error {
	return s.EnsurePrices(ctx, DefaultPrices, effectiveFrom)
}

// EnsurePrices adds the rows of prices that are missing, so that running it twice, or again
// later, changes nothing.
//
// A tier default (a row without a model) is added, effective from effectiveFrom, when the tier
// has no default in force at effectiveFrom: a tier whose book starts later gets the default for
// the time before its first row, which no usage can have been billed in.
//
// A model's row is added when the tier has no row of that model at all. It takes effect from
// effectiveFrom on a book that starts there (no row of the tier is older), and otherwise from
// now: before now the model's requests may have been billed at the tier's default, and a price
// is never changed retroactively.
func (s *Service) EnsurePrices(ctx context.Context, prices []Price, effectiveFrom time.Time) (err error) {
	defer services.Wrap(&err, "catalog.EnsurePrices")
	now := s.now().UTC()
	for _, p := range prices {
		var sql string
		if p.Model == "" {
			sql = `
				INSERT INTO prices (tier, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
				SELECT $1, $2, $3, $4, $5
				WHERE NOT EXISTS (SELECT 1 FROM prices WHERE tier = $1 AND model IS NULL AND effective_from <= $4)`
		} else {
			sql = `
				INSERT INTO prices (tier, model, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_at)
				SELECT $1, $6, $2, $3,
					CASE WHEN EXISTS (SELECT 1 FROM prices WHERE tier = $1 AND effective_from < $4) THEN greatest($4, $5) ELSE $4 END,
					$5
				WHERE NOT EXISTS (SELECT 1 FROM prices WHERE tier = $1 AND model = $6)`
		}
		args := []any{string(p.Tier), int64(p.Input), int64(p.Output), effectiveFrom.UTC(), now}
		if p.Model != "" {
			args = append(args, p.Model)
		}
		if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
			return err
		}
	}
	return nil
}

// PriceChange is a row of the price book's history.
type PriceChange struct {
	Price
	CreatedBy string    `json:"created_by"` // the email of who scheduled it; empty for the defaults
	CreatedAt time.Time `json:"created_at"`
}

// ScheduleInput is a price change a finance user or admin schedules.
type ScheduleInput struct {
	Tier Tier `json:"tier"`
	// Model names the model the price is for; empty, the change is to the tier's default, which
	// prices every model without a row of its own.
	Model         string         `json:"model,omitempty"`
	Input         money.MicroUSD `json:"input_usd_per_mtok"`
	Output        money.MicroUSD `json:"output_usd_per_mtok"`
	EffectiveFrom time.Time      `json:"effective_from"`
	// CachedInput is the price of a cached input token; nil gives the default, a quarter of
	// Input (DefaultCachedInput).
	CachedInput *money.MicroUSD `json:"cached_input_usd_per_mtok,omitempty"`
	// Free says a price of $0 is meant: without it a $0 input or output price is refused as a
	// slip (an empty field, a misplaced decimal), since it gives the tier's tokens away.
	Free bool `json:"free"`
}

// FieldFree names the box that marks a $0 price as meant, in forms, the API and field errors.
const FieldFree = "free"

// Validate checks the change against the clock: prices are never changed retroactively. A price
// of $0 is taken only marked free, and a change marked free must have a $0 price in it.
func (in ScheduleInput) Validate(now time.Time) error {
	fe := services.FieldErrors{}
	if !in.Tier.Valid() {
		fe.Add("tier", "Choose realtime, standard or batch.")
	}
	if in.Model != strings.TrimSpace(in.Model) || len(in.Model) > 200 {
		fe.Add("model", "Name the model as the API does (e.g. meta-llama/Meta-Llama-3-70B-Instruct), or leave it empty for the tier's default.")
	}
	for _, f := range []struct {
		field, kind string
		price       money.MicroUSD
	}{{"input_usd_per_mtok", "input", in.Input}, {"output_usd_per_mtok", "output", in.Output}} {
		switch {
		case f.price < 0 || f.price > 1000*1_000_000:
			fe.Add(f.field, "Use a price from $0 to $1,000 per million tokens.")
		case f.price == 0 && !in.Free:
			fe.Add(f.field, "A price of $0 gives the tier's "+f.kind+" tokens away, and no rig asking more than $0 "+
				"is routed at it. If that is meant, tick \"Free on purpose\"; otherwise enter the price.")
		}
	}
	if c := in.CachedInput; c != nil && (*c < 0 || *c > in.Input) {
		fe.Add("cached_input_usd_per_mtok", "Use a cached input price from $0 to the input price: a token the engine "+
			"served from its cache never costs more than one it computed.")
	}
	if in.Free && in.Input != 0 && in.Output != 0 {
		fe.Add(FieldFree, "Neither price is $0: untick \"Free on purpose\", or set the free one to 0.")
	}
	if in.EffectiveFrom.IsZero() {
		fe.Add("effective_from", "Choose when the price takes effect.")
	} else if in.EffectiveFrom.Before(now) {
		fe.Add("effective_from", "A price change takes effect in the future; usage already served keeps its price.")
	}
	return fe.Err()
}

// cachedInput is the change's cached input price: the one given, or the default.
func (in ScheduleInput) cachedInput() money.MicroUSD {
	if in.CachedInput != nil {
		return *in.CachedInput
	}
	return DefaultCachedInput(in.Input)
}

// SchedulePrice records a price change from its date on, with who made it, and records it in
// the finance audit log (before: the price that was to be in force from that moment for the
// model, or the tier's default) in the same transaction. A second change for the same tier,
// model and instant is a conflict, not an overwrite.
func (s *Service) SchedulePrice(ctx context.Context, byUserID string, in ScheduleInput) (_ PriceChange, err error) {
	defer services.Wrap(&err, "catalog.SchedulePrice(%s)", in.Tier)
	now := s.now().UTC()
	if err := in.Validate(now); err != nil {
		return PriceChange{}, err
	}
	change := PriceChange{Price: Price{Tier: in.Tier, Model: in.Model, Input: in.Input, Output: in.Output, EffectiveFrom: in.EffectiveFrom.UTC(),
		CachedInput: in.cachedInput()}, CreatedAt: now}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// What the model's requests were to pay from that moment: its own latest row, else the tier's default.
		rows, err := tx.Query(ctx, `
			SELECT `+priceColumns+`
			FROM prices WHERE tier = $1 AND (model = $2 OR model IS NULL) AND effective_from <= $3
			ORDER BY model IS NULL, effective_from DESC LIMIT 1`, string(in.Tier), nullModel(in.Model), change.EffectiveFrom)
		if err != nil {
			return err
		}
		superseded, err := pgx.CollectRows(rows, scanPrice)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO prices (tier, model, input_micro_usd_per_mtok, output_micro_usd_per_mtok, effective_from, created_by, created_at,
				cached_input_micro_usd_per_mtok)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			string(in.Tier), nullModel(in.Model), int64(in.Input), int64(in.Output), change.EffectiveFrom, byUserID, now,
			int64(change.CachedInput)).Scan(&change.ID); err != nil {
			return err
		}
		if s.audit == nil {
			return nil
		}
		var before any
		if len(superseded) == 1 {
			before = superseded[0]
		}
		return s.audit.RecordTx(ctx, tx, audit.Record{
			ActorID: byUserID, Action: audit.ActionPriceChange, SubjectKind: "price", SubjectID: strconv.FormatInt(change.ID, 10),
			Summary: fmt.Sprintf("%s price from %s: %s input, %s cached input, %s output per million tokens%s", change.Price.Subject(),
				change.EffectiveFrom.Format(time.RFC3339), in.Input, change.CachedInput, in.Output, freeNote(in.Free)),
			Before: before, After: change.Price,
		})
	})
	if isUniqueViolation(err) {
		return PriceChange{}, &services.Error{Code: services.CodeConflict, Message: "A change for this " + change.Price.Subject() + " price already takes effect at that moment.",
			Fields: map[string]string{"effective_from": "Choose another moment."}}
	}
	if err != nil {
		return PriceChange{}, err
	}
	return change, nil
}

// PriceHistory lists every price of the book, latest effective first.
func (s *Service) PriceHistory(ctx context.Context) (_ []PriceChange, err error) {
	defer services.Wrap(&err, "catalog.PriceHistory")
	rows, err := s.pool.Query(ctx, `
		SELECT p.id, p.tier, coalesce(p.model, ''), p.input_micro_usd_per_mtok, p.output_micro_usd_per_mtok, p.effective_from,
			p.cached_input_micro_usd_per_mtok, coalesce(p.created_by::text, ''), p.created_at
		FROM prices p
		ORDER BY p.effective_from DESC, p.tier, p.model NULLS FIRST`)
	if err != nil {
		return nil, err
	}
	var by []string // the id of the user who scheduled each change, "" for the platform
	changes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PriceChange, error) {
		var c PriceChange
		var in, out, cached int64
		var createdBy string
		err := r.Scan(&c.ID, &c.Tier, &c.Model, &in, &out, &c.EffectiveFrom, &cached, &createdBy, &c.CreatedAt)
		c.Input, c.Output, c.CachedInput = money.MicroUSD(in), money.MicroUSD(out), money.MicroUSD(cached)
		by = append(by, createdBy)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	emails, err := accounts.EmailsByID(ctx, s.pool, by)
	if err != nil {
		return nil, err
	}
	for i := range changes {
		changes[i].CreatedBy = emails[by[i]]
	}
	return changes, nil
}

// Subject names what the row prices, in messages and the audit log: "standard" for the tier's
// default, "standard meta-llama/Meta-Llama-3-70B-Instruct" for a model's own row.
func (p Price) Subject() string {
	if p.Model == "" {
		return string(p.Tier)
	}
	return string(p.Tier) + " " + p.Model
}

// nullModel is the model column of a row: NULL for a tier's default.
func nullModel(model string) *string {
	if model == "" {
		return nil
	}
	return &model
}

// freeNote marks, in the audit log, a price change whose $0 was meant.
func freeNote(free bool) string {
	if free {
		return ", free on purpose"
	}
	return ""
}
