// Package credits sells prepaid credit: a customer buys it through Stripe Checkout
// (credits.go, stripe.go), Stripe's webhooks grant it, mark a purchase failed or take a refund
// back (stripe_webhook.go), each delivery stored once in stripe_events (stripe_events.go), and
// finance adjusts a balance by hand (Credits.Adjust). Auto top-up (topup*.go) saves a card and
// charges it off-session when the balance falls below the account's threshold, once per
// crossing, credited by the same webhook (docs/auto-topup.md). events_local.go writes and signs
// the events Stripe would send, for running without Stripe. Every movement of money is a
// transaction posted through package ledger.
//
// Tables: credit_purchases, stripe_events, topup_settings and topup_attempts, which only this
// package names in SQL. It imports services/ledger (to post and read balances),
// services/accounts (the buying account's lock, accounts.LockAccount), services/audit,
// services/mail (the message a failed top-up queues) and services/money; nothing of the
// gateway's admission or request log, and the ledger does not import it.
package credits
