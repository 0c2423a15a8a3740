// Package workspacetest serves git repositories over HTTP for tests, the
// way Gitea does: smart HTTP through git http-backend, with basic
// authentication by token — one token that may read, others that may also
// push.
package workspacetest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Server is a git HTTP server over bare repositories in Root.
type Server struct {
	*httptest.Server
	Root string

	mu      sync.Mutex
	readers map[string]bool // tokens that may fetch
	writers map[string]bool // tokens that may fetch and push
	// Requests counts requests by whether they carried a valid token.
	denied int
	down   bool
}

// New starts a server; readers and writers are the accepted tokens.
func New(t testing.TB, readers, writers []string) *Server {
	t.Helper()
	s := &Server{Root: t.TempDir(), readers: map[string]bool{}, writers: map[string]bool{}}
	for _, tok := range readers {
		s.readers[tok] = true
	}
	for _, tok := range writers {
		s.writers[tok] = true
	}
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{
		"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.Root,
	}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		down := s.down
		s.mu.Unlock()
		if down {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		push := r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")
		_, token, ok := r.BasicAuth()
		s.mu.Lock()
		allowed := ok && (s.writers[token] || !push && s.readers[token])
		if !allowed {
			s.denied++
		}
		s.mu.Unlock()
		if !allowed {
			w.Header().Set("WWW-Authenticate", `Basic realm="Gitea"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		repo := strings.TrimSuffix(strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), ".git/", 2)[0], ".git")
		if _, err := os.Stat(filepath.Join(s.Root, repo+".git")); err != nil {
			http.NotFound(w, r)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// URL is the clone URL of a repository (owner/name).
func (s *Server) URL(repo string) string { return s.Server.URL + "/" + repo + ".git" }

// SetDown makes every request fail with 502 (Gitea down) or not.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Denied counts requests refused for a missing or wrong token.
func (s *Server) Denied() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.denied
}

// Git runs git for a test, failing it on error, and returns the output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	// The repositories may belong to the agents' user (mozi as root).
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// NewRepo creates owner/name on the server with files committed on main
// (HEAD points to main), and returns a clone to change it with (pushes
// from it bypass authentication).
func (s *Server) NewRepo(t testing.TB, repo string, files map[string]string) (work string) {
	t.Helper()
	bare := filepath.Join(s.Root, repo+".git")
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		t.Fatal(err)
	}
	Git(t, s.Root, "init", "-q", "--bare", "-b", "main", bare)
	Git(t, bare, "config", "http.receivepack", "true")
	work = t.TempDir()
	Git(t, work, "init", "-q", "-b", "main")
	for name, content := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "-q", "--allow-empty", "-m", "initial")
	Git(t, work, "remote", "add", "origin", bare)
	Git(t, work, "push", "-q", "origin", "main")
	return work
}

// Bare is the path of a repository's bare repository on the server.
func (s *Server) Bare(repo string) string { return filepath.Join(s.Root, repo+".git") }
