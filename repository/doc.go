// Package repository owns mozi's execution state in PostgreSQL: the schema
// (goose migrations embedded in the binary), the task state machine, and the
// merge of Gitea's issue data with local rows.
//
// Invariants:
//   - SQL lives only in this package; upper layers call Go methods.
//   - Every task state transition is one conditional UPDATE
//     (… WHERE status = ANY(allowed)), so replicas, webhooks and the ticker can
//     race on a task without corrupting it: exactly one of them wins.
//   - At most one live task exists per (repo, issue, action type, agent); the
//     database enforces it with a partial unique index.
package repository
