// Package webhook is mozi's intake: the HTTP endpoint Gitea posts to
// (signature check, size and content checks, durable inbox with group
// commit), and the inbox processor that maps each delivery to task_state
// changes, exactly once per event.
//
// Invariants:
//   - A delivery is committed to webhook_deliveries before mozi answers 2xx.
//   - A delivery's effects, its semantic-key claim and its "processed" mark
//     commit in one transaction: a crash in between redoes all or nothing.
//   - Work on one issue is serialised by an advisory lock, and payloads are
//     ordered by the updated_at, so any arrival order converges.
package webhook
