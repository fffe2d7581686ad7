package db

// Who owns each table.
//
// Every table has one package that reads and writes it: a change to its shape has one place to go. Other packages
// call the owner's functions, which return the owner's types; no other package's SQL names the table
// (docs/table-owners.md). TestEveryTableHasOneOwner (owners_test.go) reads the SQL in every package's Go files and
// fails on a table named outside its owner, unless Borrowed lists that package and table: the uses not moved yet.
// It also fails on an entry of Borrowed no longer needed, so that the list only shrinks, and on a table of the
// migrations without an owner.

// Owners maps each table to its owning package, by its path in the module.
var Owners = map[string]string{
	// Who uses the platform: accounts, their people, sessions, roles and API keys.
	"accounts":    "services/accounts",
	"users":       "services/accounts",
	"sessions":    "services/accounts",
	"role_grants": "services/accounts",
	"api_keys":    "services/accounts",
	"memberships": "services/accounts",
	"invitations": "services/accounts",
	"user_tokens": "services/accounts",

	"audit_log": "services/audit",

	"mail_outbox": "services/mail",

	"batches":     "services/batch",
	"batch_files": "services/batch",
	"batch_lines": "services/batch",

	"provider_benchmarks": "services/benchmarks",

	// The ledger, prepaid credit and Stripe's events; the gateway's admission and request log.
	"ledger_accounts":     "services/ledger",
	"ledger_transactions": "services/ledger",
	"ledger_postings":     "services/ledger",
	"credit_purchases":    "services/credits",
	"stripe_events":       "services/credits",
	"topup_settings":      "services/credits",
	"topup_attempts":      "services/credits",
	"admission_holds":     "services/admission",
	"gateway_requests":    "services/requestlog",
	// An administrator's resolution of a discrepancy the request log lists.
	"discrepancy_resolutions": "services/requestlog",

	"offerings": "services/catalog",
	"prices":    "services/catalog",

	// Documents: invoices, statements, credit notes and what closing a month writes.
	"invoices":                "services/invoicing",
	"invoice_lines":           "services/invoicing",
	"invoice_summaries":       "services/invoicing",
	"invoice_closes":          "services/invoicing",
	"invoice_ledger_entries":  "services/invoicing",
	"invoice_provider_shares": "services/invoicing",
	"statements":              "services/invoicing",
	"statement_lines":         "services/invoicing",
	"credit_notes":            "services/invoicing",
	"credit_note_clawbacks":   "services/invoicing",
	"billing_details":         "services/invoicing",
	"document_sequences":      "services/invoicing",
	"flag_resolutions":        "services/invoicing",

	// Usage as the meter prices it, and what it refused.
	"usage_events":             "services/metering",
	"usage_event_keys":         "services/metering",
	"usage_hourly":             "services/metering",
	"usage_by_batch":           "services/metering",
	"usage_rejections":         "services/metering",
	"usage_rejection_counts":   "services/metering",
	"usage_rejections_counted": "services/metering",
	"api_key_spend":            "services/metering",
	"api_key_spend_days":       "services/metering",

	// The monthly partitions of usage_events, and the months dropped under the retention.
	"usage_events_default": "services/usagestore",
	"usage_months_dropped": "services/usagestore",

	// Member limits, account budgets and the alerts on spend.
	"member_limits":       "services/budgets",
	"account_budgets":     "services/budgets",
	"alert_rules":         "services/budgets",
	"alert_firings":       "services/budgets",
	"alert_subscriptions": "services/budgets",

	"payouts":                  "services/payouts",
	"provider_stripe_accounts": "services/payouts",

	// Outgoing webhooks: accounts' endpoints, their events, deliveries and the log of attempts.
	"webhook_endpoints":  "services/webhooks",
	"webhook_events":     "services/webhooks",
	"webhook_deliveries": "services/webhooks",
	"webhook_attempts":   "services/webhooks",
}

// Borrowed lists the tables a package's SQL still names without owning them, package to tables, each with why:
// uses to move behind their owner's functions. An entry is removed when its use moves.
var Borrowed = map[string]map[string]string{}
