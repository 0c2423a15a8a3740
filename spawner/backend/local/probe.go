package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/local/sandbox"
)

// Probe answers `mozi doctor`'s questions about the local backend: who
// agents run as, whether the sandbox works here, whether an agent's CLI
// can be seen and run inside it.
type Probe struct {
	stateDir string
	hide     []string
	runAs    *syscall.Credential
	sb       *sandbox.Sandbox
}

// NewProbe resolves the agents' user (an error says why it cannot).
func NewProbe(s Settings) (*Probe, error) {
	runAs, err := AgentsUser(s.User)
	if err != nil {
		return nil, err
	}
	return &Probe{stateDir: s.StateDir, hide: s.Hide, runAs: runAs}, nil
}

// RunsAs is the uid agents run as; false when they run as mozi's user.
func (p *Probe) RunsAs() (uid uint32, other bool) {
	if p.runAs == nil {
		return 0, false
	}
	return p.runAs.Uid, true
}

// CheckSandbox checks that bubblewrap is there and works here as the
// agents' user (it needs user namespaces); it returns bwrap's path.
func (p *Probe) CheckSandbox(bwrap string) (string, error) {
	sb, err := sandbox.New(bwrap, filepath.Join(p.stateDir, "sandbox"))
	if err != nil {
		return "", err
	}
	if err := sb.Check(func(argv []string) ([]byte, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.runAs}
		return cmd.CombinedOutput()
	}); err != nil {
		return "", err
	}
	p.sb = sb
	return sb.Bwrap(), nil
}

// Sandboxed reports whether CheckSandbox found a working sandbox.
func (p *Probe) Sandboxed() bool { return p.sb != nil }

// spec is the view a sandboxed run of a gets, but for its worktree.
func (p *Probe) spec(a backend.Agent) sandbox.Spec {
	spec := sandbox.Spec{Hide: append([]string{p.stateDir}, p.hide...), RunAs: p.runAs}
	if a.Home != "" {
		spec.Writable = []string{a.Home}
	}
	return spec
}

// Conceals says whether path is hidden inside a's sandbox, and by what.
func (p *Probe) Conceals(a backend.Agent, path string) (by string, hidden bool) {
	return p.spec(a).Conceals(path)
}

var versionRE = regexp.MustCompile(`\d+\.\d+`)

// versionLine is the line of a --version output that holds the version
// (CLIs print warnings before it), else its first line.
func versionLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if versionRE.MatchString(l) && len(l) < 120 {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(lines[0])
}

// Version runs the agent's CLI with --version the way mozi would run the
// agent (its user, its sandbox when it has one and it works) and returns
// the line that holds the version.
func (p *Probe) Version(ctx context.Context, a backend.Agent, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := []string{path, "--version"}
	home, err := os.MkdirTemp("", "mozi-doctor-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	if p.runAs != nil {
		if err := os.Chown(home, int(p.runAs.Uid), int(p.runAs.Gid)); err != nil {
			return "", err
		}
	}
	if p.sb != nil && a.Sandboxed {
		// A home of its own for the check (the agent's may not exist yet).
		spec := p.spec(a)
		spec.Chdir, spec.Writable = home, []string{home}
		if argv, err = p.sb.Command(spec, sandbox.Limits{}, argv); err != nil {
			return "", err
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=/tmp", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.runAs, Setpgid: true}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	first := versionLine(string(out))
	if err != nil {
		if first != "" {
			return "", fmt.Errorf("%w: %s", err, first)
		}
		return "", err
	}
	if first == "" {
		first = "no version printed"
	}
	return first, nil
}

// ErrSandboxUnavailable: the sandbox's program is not installed.
var ErrSandboxUnavailable = sandbox.ErrUnavailable
