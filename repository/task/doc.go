// Package task is mozi's domain vocabulary, shared by every other package:
// a task and its status, action and business types, the events of the
// state machine, dedupe keys, priorities and backoff, and the shapes of
// what mozi knows of Gitea's issues, pull requests and commit statuses.
//
// Invariant: it imports nothing of mozi and nothing outside the standard
// library, so templates, prompts and tools can use it without pulling in
// the database or the Gitea client.
package task
