package console

import "github.com/moziplus/mozi/repository/task"

// attemptPrompt is the prompt an attempt got, as the task page folds it.
type attemptPrompt struct {
	Attempt int
	Text    string
	Bytes   int
	// Stored is false for an attempt whose prompt mozi did not keep
	// (run before migration 00036, or the write failed).
	Stored bool
}

// promptsOf pairs each attempt with its stored prompt, in the attempts'
// order.
func promptsOf(attempts []task.Attempt, stored map[int]string) []attemptPrompt {
	out := make([]attemptPrompt, 0, len(attempts))
	for _, a := range attempts {
		p, ok := stored[a.Attempt]
		out = append(out, attemptPrompt{Attempt: a.Attempt, Text: p, Bytes: len(p), Stored: ok})
	}
	return out
}
