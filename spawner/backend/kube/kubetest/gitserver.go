package kubetest

import (
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// GitServer serves bare repositories over git's smart HTTP on loopback
// (pods use the host network), to a client that presents Token.
type GitServer struct {
	URL   string
	Root  string
	Token string
}

// ServeGit serves repository "owner/repo" with a commit on main (README
// says "main") and a branch "feature" one commit further (README says
// "feature"); pushes are accepted.
func ServeGit(t testing.TB, token string) *GitServer {
	t.Helper()
	root := t.TempDir()
	work := t.TempDir()
	bare := filepath.Join(root, "owner", "repo.git")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	}
	git(work, "init", "-q", "-b", "main", ".")
	require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("main\n"), 0o644))
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "main")
	git(work, "checkout", "-q", "-b", "feature")
	require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("feature\n"), 0o644))
	git(work, "commit", "-q", "-am", "feature")
	require.NoError(t, os.MkdirAll(filepath.Dir(bare), 0o755))
	git(root, "clone", "-q", "--bare", work, bare)
	git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
	git(bare, "config", "http.receivepack", "true")

	execPath, err := exec.Command("git", "--exec-path").Output()
	require.NoError(t, err)
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pw, ok := r.BasicAuth(); !ok || pw != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &GitServer{URL: "http://" + ln.Addr().String(), Root: root, Token: token}
}

// Branch returns the commit origin's branch points at ("" when none).
func (g *GitServer) Branch(t testing.TB, repo, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", filepath.Join(g.Root, repo+".git"), "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
