// Package gitea is mozi's side of the Gitea API: one long-lived client
// (timeouts, a client-side rate limit, retries that honour Retry-After,
// metrics per endpoint, one log line per outage), the administration mozi
// doctor and mozi webhook install need, and the issue reader that serves
// issue data to prompts and the dispatcher from mozi's copy first and from
// Gitea only on a miss.
//
// Invariants:
//   - A POST or PATCH is retried only when Gitea said it did not act (429)
//     or the connection was never made.
//   - A 404 is task.ErrNotFound, wrapped with what was asked.
//   - The reader writes what it learns from Gitea into the store, through
//     IssueCache: no SQL here.
package gitea
