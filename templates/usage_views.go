package templates

// UsageFilters are the usage pages' filter values, their choices and what is wrong with them.
type UsageFilters struct {
	From, To    string // UTC dates, 2006-01-02, both days included
	Model, Tier string
	Models      []Option
	Errors      map[string]string
}

// Invalid reports whether a filter value is wrong: the page then shows no usage.
func (f UsageFilters) Invalid() bool { return len(f.Errors) > 0 }

// UsagePage is a developer's requests, their totals per day and tier, and the export.
type UsagePage struct {
	Page
	Filters   UsageFilters
	Requests  []UsageRequestRow
	Days      []UsageTotalRow
	Total     UsageTotalRow
	NextPage  string // older requests, "" on the last page
	FirstPage string // the newest requests, "" when on them
	CSVURL    string // the export of the filtered requests
}

// UsageRequestRow is one metered request.
type UsageRequestRow struct {
	When, RequestID, Model, Tier string
	Hardware, Provider, Offering string // "4x NVIDIA GeForce RTX 4090", its provider, the offering id
	TokensIn, TokensOut          string
	TokensCached                 string // of TokensIn, billed at the cached input price
	TTFT, Duration               string
	TTFTTitle                    string // why there is no first-token time ("—"), or what the figure is
	Cost                         string // exact, "$0.000042"
	Status                       string
	BatchID                      string // the batch whose line the request served, "" for none
}

// UsageTotalRow is what a day's requests of one tier came to; the total row has no day or
// tier.
type UsageTotalRow struct {
	Day, Tier, Requests, TokensIn, TokensOut, Cost string
	TokensCached                                   string // of TokensIn
}

// EarningsPage is the traffic a provider's rigs served and what it earned.
type EarningsPage struct {
	Page
	Filters UsageFilters
	Days    []EarningsRow
	Total   EarningsRow
}

// EarningsRow is what one offering served and earned on one day; the total row has no day
// or offering.
type EarningsRow struct {
	Day, Offering, Hardware, Model      string
	Requests, TokensIn, TokensOut, Earn string // Earn is exact, "$0.000091620001"
}
