// Package budgets owns what a customer may spend beyond its balance and who is told as spend
// grows (docs/budgets.md): the limits on the keys a person created in an account
// (member_limits), the account's monthly budget (account_budgets), the alert rules and their
// thresholds (alert_rules), who gets an alert's e-mail (alert_subscriptions), and the record
// of every alert that fired (alert_firings).
//
// Admission enforces the limits, reading member_limits and account_budgets through
// AdmissionLimits, queued into the batch that reads an account's figures (package admission,
// which this package imports, so the platform hands them in); this package sets them, reports a key's
// spend in its period (KeyUsage) and fires the alerts (Alerts). An alert fires once per rule,
// period and threshold: its firing row is unique on those, and is written in the transaction
// that queues its e-mail and its webhook event, so a restart neither loses nor repeats one.
package budgets
