package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
)

// gitRunner runs mozi's own git commands. They run outside any sandbox, on
// repositories agents write to, so nothing an agent can write may make
// them run code: hooks are off, no global or system configuration is read,
// and commands on a worktree name its common directory themselves instead
// of following the worktree's commondir file (which the agent can edit).
type gitRunner struct {
	bin  string
	home string
	cred *syscall.Credential
}

// neutral are the options every mozi git command starts with.
var neutral = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	// The repositories may belong to the agents' user, not mozi's.
	"-c", "safe.directory=*",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// gitCall is one git command: where it runs and what else it needs.
type gitCall struct {
	args []string
	// gitDir, commonDir and workTree set GIT_DIR, GIT_COMMON_DIR and
	// GIT_WORK_TREE (empty: not set).
	gitDir, commonDir, workTree string
	// token, when set, answers git's credential requests (mozi's own
	// fetches): it goes to git in the environment, never on a command
	// line or in a configuration file.
	token string
}

func (g *gitRunner) env(c gitCall) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + g.home,
		"LANG=C", "LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ASKPASS=/bin/false",
		"GIT_SSH_COMMAND=false",
	}
	if c.gitDir != "" {
		env = append(env, "GIT_DIR="+c.gitDir)
	}
	if c.commonDir != "" {
		env = append(env, "GIT_COMMON_DIR="+c.commonDir)
	}
	if c.workTree != "" {
		env = append(env, "GIT_WORK_TREE="+c.workTree)
	}
	if c.token != "" {
		env = append(env, "MOZI_GIT_TOKEN="+c.token)
	}
	return env
}

// fetchHelper answers git's credential requests with the token in
// MOZI_GIT_TOKEN; the empty helper before it drops every other helper
// (the agents' one in the repository's configuration).
var fetchHelper = []string{"-c", "credential.helper=",
	"-c", `credential.helper=!f() { test "$1" = get || exit 0; echo username=mozi; echo "password=$MOZI_GIT_TOKEN"; }; f`}

// run runs git and returns its standard output, trimmed. A failure
// carries git's own last error line.
func (g *gitRunner) run(ctx context.Context, c gitCall) (string, error) {
	args := slices.Clone(neutral)
	if c.token != "" {
		args = append(args, fetchHelper...)
	}
	args = append(args, c.args...)
	cmd := exec.CommandContext(ctx, g.bin, args...)
	// A killed git leaves its lock files (a ref's, the index's), and every
	// later command on them fails until someone removes them; on SIGTERM
	// git removes them itself. One that does not end is killed after all.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = gitWaitDelay
	cmd.Env = g.env(c)
	cmd.Dir = g.home
	if g.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: g.cred}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	op := subcommand(c.args)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: %w", op, ctx.Err())
		}
		detail := g.shorten(c, userinfo.ReplaceAllString(stderr.String(), "$1"))
		return "", &gitError{op: op, msg: lastLine(detail), detail: detail, err: err}
	}
	return strings.TrimSpace(stdout.String()), nil
}

// gitWaitDelay is how long a cancelled git command has to end on SIGTERM.
const gitWaitDelay = 5 * time.Second

// subcommand names a git command for messages: its subcommand (and the
// subcommand's own, "worktree add"), not the options before it.
func subcommand(args []string) string {
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if (a == "worktree" || a == "remote" || a == "reflog") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			return a + " " + args[i+1]
		}
		return a
	}
	return "git"
}

// shorten drops the directories of mozi's own layout from git's messages,
// which name files by their absolute paths: the caller's message says
// which repository it is, and a path relative to the mirror (a ref's lock)
// is what tells a reader what went wrong.
func (g *gitRunner) shorten(c gitCall, msg string) string {
	dirs := []string{c.gitDir, c.commonDir, c.workTree}
	for _, a := range c.args {
		if d, ok := strings.CutPrefix(a, "--git-dir="); ok {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, g.home)
	for _, d := range dirs {
		if d != "" && d != "/" {
			msg = strings.ReplaceAll(msg, d+"/", "")
		}
	}
	return msg
}

// gitError is a failed git command, with git's own explanation.
type gitError struct {
	op  string
	msg string // the most telling line of what git printed
	// detail is all git printed (credentials cut), to classify by.
	detail string
	err    error
}

func (e *gitError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("git %s: %v", e.op, e.err)
	}
	return fmt.Sprintf("git %s: %s", e.op, e.msg)
}

func (e *gitError) Unwrap() error { return e.err }

// userinfo matches credentials in a URL (scheme://user:secret@host).
var userinfo = regexp.MustCompile(`(\w+://)[^/@\s]+@`)

// lastLine is git's most telling error line, with any credentials cut.
func lastLine(stderr string) string {
	var pick string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "hint:") {
			continue
		}
		pick = line
		if strings.HasPrefix(line, "fatal:") || strings.HasPrefix(line, "error:") {
			break
		}
	}
	pick = strings.TrimPrefix(strings.TrimPrefix(pick, "fatal: "), "error: ")
	return userinfo.ReplaceAllString(pick, "$1")
}

// Errors of preparing a workspace, by what can be done about them.
var (
	// ErrUnreachable: the remote did not answer (network, DNS, a 5xx).
	// It says nothing about the task: wait and try again.
	ErrUnreachable = backend.ErrUnreachable
	// ErrNoAccess: the remote refused mozi's credentials (401, 403).
	ErrNoAccess = errors.New("no access to the repository")
	// ErrNoRepository: the remote has no such repository (404).
	ErrNoRepository = errors.New("no such repository")
	// ErrBranchGone: the branch the task must work on is not on the
	// remote any more (deleted, or the pull request's head was renamed).
	ErrBranchGone = backend.ErrBranchGone
	// ErrBranchBusy: another running task has the branch checked out.
	ErrBranchBusy = backend.ErrBranchBusy
	// ErrDiskFull: no space left for the mirror or the worktree.
	ErrDiskFull = errors.New("no space left on device")
)

// networkTrouble is what git (and curl under it) prints when the remote
// did not answer: DNS, connections refused, reset or timed out, TLS
// handshakes that fail, a transfer cut short, and 5xx answers.
var networkTrouble = regexp.MustCompile(`could not resolve (host|proxy)|failed to connect|couldn't connect to server|` +
	`connection (refused|reset|timed out|closed)|operation timed out|network is unreachable|no route to host|` +
	`early eof|remote end hung up|unexpected disconnect|transfer closed|empty reply from server|` +
	`recv failure|send failure|rpc failed|gnutls_handshake|ssl_error_syscall|ssl connect error|` +
	`(returned error|http)[: ]+5\d\d\b`)

// classify maps a failed remote operation to one of the errors above.
// Anything else (a lock another git holds, a corrupt mirror) stays a plain
// error: waiting for the network would not fix it, and the task would wait
// forever without a word.
func classify(err error) error {
	var ge *gitError
	if !errors.As(err, &ge) {
		return err
	}
	msg := strings.ToLower(ge.msg)
	switch {
	case strings.Contains(msg, "no space left"):
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	case strings.Contains(msg, "authentication failed"), strings.Contains(msg, "could not read username"),
		strings.Contains(msg, "could not read password"), strings.Contains(msg, "error: 401"),
		strings.Contains(msg, "error: 403"), strings.Contains(msg, "permission denied"):
		return fmt.Errorf("%w: %w", ErrNoAccess, err)
	case strings.Contains(msg, "not found"), strings.Contains(msg, "error: 404"),
		strings.Contains(msg, "does not appear to be a git repository"), strings.Contains(msg, "does not exist"):
		return fmt.Errorf("%w: %w", ErrNoRepository, err)
	// curl's reason may be on a line before the one git ends with
	// ("RPC failed; HTTP 502" before "expected flush after ref listing").
	case networkTrouble.MatchString(strings.ToLower(ge.detail)) || networkTrouble.MatchString(msg):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}
