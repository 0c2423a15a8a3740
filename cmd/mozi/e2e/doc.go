// Package e2e is mozi's end-to-end suite (build tag e2e): mozi serve runs
// as users run it — its own process, its HTTP receiver, dispatcher,
// ticker, spawner, worktrees and bubblewrap sandbox — against a real
// Gitea (repository/gitea/realgitea) and a real PostgreSQL, with agents
// that are small programs doing real work with git and Gitea's API from
// inside the sandbox (or real agent CLIs whose fake model has them run
// that program: cli_test.go). Each test asserts on what Gitea shows
// afterwards and on mozi's rows.
//
//	go test -tags e2e ./cmd/mozi/e2e
//
// The package has no code outside its tests.
package e2e
