// Package realgitea starts a real Gitea for tests: the version mozi's
// recorded fixtures come from (DefaultVersion), built once from the Go
// module proxy and cached by version under the user's cache directory, or
// the binary named by MOZI_TEST_GITEA. A server runs on a free loopback
// port with SQLite in a temporary directory, webhooks allowed to loopback,
// and an admin whose token creates the users, repositories and webhooks a
// test needs. Everything it starts is stopped by Stop (or the test's
// cleanup); nothing outside the temporary directory and the cache is
// written.
//
// It is the real counterpart of giteatest's fake: the e2e suite (build tag
// e2e) runs mozi against it, and a contract test checks the fake against
// it.
package realgitea
