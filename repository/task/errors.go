package task

import "errors"

// ErrNotFound means what was asked for does not exist: no task with that
// id, no such issue or pull request in mozi's copy, a 404 from Gitea.
// Callers wrap it with what they looked for and check it with errors.Is.
var ErrNotFound = errors.New("not found")
