package embedded

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// defaultPath is the PATH of initdb and postgres when mozi has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// command prepares a PostgreSQL program: as the run user; in its own
// process group, so that a Ctrl-C in mozi's terminal reaches mozi only,
// which stops its children itself once it has drained its work; sent
// deathSig when mozi dies; and with a minimal environment.
func (c *Cluster) command(cmd *exec.Cmd, deathSig syscall.Signal) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true}
	home := os.Getenv("HOME")
	if c.user != nil {
		attr.Credential = c.user.credential()
		home = c.user.home
	}
	setParentDeathSignal(attr, deathSig)
	cmd.SysProcAttr = attr
	cmd.Env = childEnv(os.Environ(), home)
	return cmd
}

// childEnv is the whole environment of initdb and postgres, taken from
// mozi's environ: PATH, the locale (LANG, LC_*) and TZ, which initdb and
// the server read, and the run user's home. Nothing else: mozi's holds
// secrets (MOZI_GITEA_TOKEN, MOZI_WEBHOOK_SECRET, MOZI_DATABASE_URL, agent
// tokens) that a database server has no use for and would show in
// /proc/PID/environ, and PG* variables (PGDATA, PGPORT…) that would
// override what mozi passes on the command line.
func childEnv(environ []string, home string) []string {
	var env []string
	hasPath := false
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case name == "PATH":
			hasPath = true
			env = append(env, kv)
		case name == "LANG", name == "TZ", strings.HasPrefix(name, "LC_"):
			env = append(env, kv)
		}
	}
	if !hasPath {
		env = append(env, "PATH="+defaultPath)
	}
	if home != "" {
		env = append(env, "HOME="+home)
	}
	return env
}
