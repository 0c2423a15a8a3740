// Package repository is mozi's PostgreSQL store: the schema (goose
// migrations embedded in the binary), the SQL of every state transition
// (keyed by the from→to table of repository/task), claims and leases, the
// webhook inbox, and mozi's copy of Gitea's issues and pull requests.
//
// Invariants:
//   - SQL lives only in this package; upper layers call Go methods.
//   - Every task state transition is one conditional UPDATE
//     (… WHERE status = ANY(allowed)), so replicas, webhooks and the ticker can
//     race on a task without corrupting it: exactly one of them wins.
//   - At most one live task exists per (repo, issue, action type, agent); the
//     database enforces it with a partial unique index.
//   - A lookup of something that does not exist fails with task.ErrNotFound.
//   - Statements read the time only as now(), which a Clock (tests) replaces
//     in every statement at once; a source test keeps it so.
package repository
