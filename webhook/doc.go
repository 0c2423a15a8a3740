// Package webhook is mozi's intake: the HTTP endpoint Gitea posts to
// (signature check, size and content checks, durable inbox with group
// commit), and the inbox processor that hands each stored delivery, in
// order and exactly once per event, to the mapping rules (webhook/rules)
// inside one transaction, retrying with backoff and parking what keeps
// failing.
//
// Invariants:
//   - A delivery is committed to webhook_deliveries before mozi answers 2xx.
//   - A delivery's effects, its semantic-key claim and its "processed" mark
//     commit in one transaction: a crash in between redoes all or nothing.
package webhook
