package agenttest

import "strconv"

// Bwrap returns an argv prefix that runs a command the way mozi's sandbox
// does: the system read-only, a private /tmp, only the worktree and the
// agent's home writable, its own PID, IPC and UTS namespaces, killed with
// its parent, in a new session, in the worktree. With uid > 0 bubblewrap
// is started as that user (and group) through setpriv, as mozi does when
// it runs as root.
func Bwrap(worktree, home string, uid int) []string {
	var argv []string
	if uid > 0 {
		id := strconv.Itoa(uid)
		argv = append(argv, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups")
	}
	return append(argv, "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--bind", worktree, worktree, "--bind", home, home,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session",
		"--chdir", worktree, "--")
}
