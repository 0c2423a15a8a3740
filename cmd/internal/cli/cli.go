// Package cli is what mozi's commands (mozi, mozi-bench) share on the
// command line: a wrong command line exits with status 2, anything else
// that fails with 1, and --help stops a command without an error.
package cli

import (
	"errors"
	"fmt"
)

// UsageError means the command line was wrong.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef is a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// ExitCode is the exit status for err: 2 for a usage error, else 1.
func ExitCode(err error) int {
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// ErrHelp stops a command after it printed its help.
var ErrHelp = errors.New("help shown")
