package workspace

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
)

// What git prints decides what the caller does: wait for the network,
// tell an operator, or retry and eventually fail the task with a comment.
func TestClassifyByWhatGitPrints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stderr string
		want   error // nil: a plain error, none of the package's
	}{
		{"host unknown", "fatal: unable to access 'https://gitea.example/a/b.git/': Could not resolve host: gitea.example", ErrUnreachable},
		{"connection refused", "fatal: unable to access 'http://127.0.0.1:1/a/b.git/': Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server", ErrUnreachable},
		{"connection timed out", "fatal: unable to access 'https://gitea.example/a/b.git/': Failed to connect to gitea.example port 443 after 129000 ms: Connection timed out", ErrUnreachable},
		{"bad gateway", "fatal: unable to access 'https://gitea.example/a/b.git/': The requested URL returned error: 502", ErrUnreachable},
		{"5xx mid-fetch", "error: RPC failed; HTTP 503 curl 22 The requested URL returned error: 503\nfatal: expected flush after ref listing", ErrUnreachable},
		{"transfer cut short", "error: 1234 bytes of body are still expected\nfetch-pack: unexpected disconnect while reading sideband packet\nfatal: early EOF\nfatal: fetch-pack: invalid index-pack output", ErrUnreachable},
		{"reset by peer", "error: RPC failed; curl 56 Recv failure: Connection reset by peer\nfatal: the remote end hung up unexpectedly", ErrUnreachable},
		{"token refused", "fatal: Authentication failed for 'https://gitea.example/a/b.git/'", ErrNoAccess},
		{"forbidden", "fatal: unable to access 'https://gitea.example/a/b.git/': The requested URL returned error: 403", ErrNoAccess},
		{"no such repository", "fatal: repository 'https://gitea.example/a/b.git/' not found", ErrNoRepository},
		{"disk full", "fatal: write error: No space left on device", ErrDiskFull},
		{"a ref's lock", "error: cannot lock ref 'refs/remotes/origin/main': Unable to create 'refs/remotes/origin/main.lock': File exists.\n\nAnother git process seems to be running in this repository", nil},
		{"corrupt mirror", "error: object file objects/ab/cdef is empty\nfatal: loose object abcdef is corrupt", nil},
		{"bad configuration", "fatal: bad config line 1 in file config", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ge := &gitError{op: "fetch", msg: lastLine(tt.stderr), detail: tt.stderr, err: &exec.ExitError{}}
			err := classify(ge)
			if tt.want != nil {
				assert.ErrorIs(t, err, tt.want)
				return
			}
			for _, e := range []error{ErrUnreachable, ErrNoAccess, ErrNoRepository, ErrDiskFull} {
				assert.False(t, errors.Is(err, e), "classified as %v", e)
			}
			assert.Equal(t, ge, err, "left as it is")
		})
	}
}

func TestSubcommandNamesTheCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--git-dir=/srv/mozi/mirrors/acme/widget.git", "fetch", "-q", "--prune", "origin"}, "fetch"},
		{[]string{"--git-dir=/srv/mozi/mirrors/acme/widget.git", "worktree", "add", "-q", "--no-checkout"}, "worktree add"},
		{[]string{"--git-dir=/srv/mozi/mirrors/acme/widget.git", "remote", "set-head", "origin", "--auto"}, "remote set-head"},
		{[]string{"init", "-q", "--bare", "/tmp/x"}, "init"},
		{[]string{"reset", "-q", "--hard"}, "reset"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, subcommand(tt.args), "%q", tt.args)
	}
}
