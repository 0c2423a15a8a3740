// Package rules maps a stored Gitea delivery to task changes (SPEC §4): it
// keeps mozi's copy of the issue or pull request, creates tasks and moves
// them through the state machine.
//
// Invariants:
//   - Every task is created through repository.Tx.CreateGuarded, the one
//     guarded create path the ticker uses too (closed issue, hourly budget,
//     one live task per issue, action and agent).
//   - Work on one issue is serialised by an advisory lock, and payloads are
//     ordered by the updated_at, so any arrival order converges.
//   - mozi's own comments, and agents mentioning themselves, make no work.
package rules
