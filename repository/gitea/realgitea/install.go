package realgitea

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultVersion is the Gitea the recorded fixtures come from.
const DefaultVersion = "1.25.4"

// Environment of the tests.
const (
	// EnvBinary names a Gitea binary to use instead of building one (a
	// distro or official build, or a source build of another version).
	EnvBinary = "MOZI_TEST_GITEA"
	// EnvVersion is the version to build from the Go module proxy when
	// EnvBinary is not set (default DefaultVersion).
	EnvVersion = "MOZI_TEST_GITEA_VERSION"
)

// Install is a Gitea binary and the directory its templates, locales and
// static files are read from (empty: the binary carries them, as official
// builds do).
type Install struct {
	Binary     string
	StaticRoot string
	Version    string
	// Built is how long the build took when this call built it (zero: it
	// was cached or given).
	Built time.Duration
}

// Find returns the Gitea the environment names: EnvBinary, else the
// cached build of EnvVersion (or DefaultVersion), building it first when
// it is not cached yet. logf reports a build, which takes minutes.
func Find(ctx context.Context, logf func(format string, args ...any)) (Install, error) {
	if bin := os.Getenv(EnvBinary); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			return Install{}, fmt.Errorf("%s=%s: %w", EnvBinary, bin, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return Install{}, fmt.Errorf("%s: %w", EnvBinary, err)
		}
		in := Install{Binary: abs, Version: binaryVersion(ctx, abs)}
		// A source build reads its assets from beside the binary.
		if dir := filepath.Dir(abs); isDir(filepath.Join(dir, "templates")) && isDir(filepath.Join(dir, "options")) {
			in.StaticRoot = dir
		}
		return in, nil
	}
	version := strings.TrimPrefix(os.Getenv(EnvVersion), "v")
	if version == "" {
		version = DefaultVersion
	}
	return Build(ctx, version, logf)
}

// CacheDir is where builds are kept: <user cache dir>/mozi/gitea.
func CacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user's cache directory: %w", err)
	}
	return filepath.Join(dir, "mozi", "gitea"), nil
}

// Build returns the cached build of a Gitea version, building it from the
// Go module proxy when it is not cached: code.gitea.io/gitea@v<version>,
// tags sqlite and sqlite_unlock_notify, with its templates, options and
// public files kept beside the binary. Concurrent callers (test binaries
// of several packages) wait for one build.
func Build(ctx context.Context, version string, logf func(format string, args ...any)) (Install, error) {
	cache, err := CacheDir()
	if err != nil {
		return Install{}, err
	}
	dir := filepath.Join(cache, version)
	in := Install{Binary: filepath.Join(dir, "gitea"), StaticRoot: dir, Version: version}
	if complete(dir) {
		return in, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Install{}, fmt.Errorf("create %s: %w", cache, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, version+".lock"))
	if err != nil {
		return Install{}, err
	}
	defer unlock()
	if complete(dir) { // built by another process while this one waited
		return in, nil
	}
	if logf != nil {
		logf("realgitea: building Gitea %s from the Go module proxy into %s (minutes on a cold build cache; once per version)", version, dir)
	}
	start := time.Now()
	if err := build(ctx, version, dir); err != nil {
		return Install{}, fmt.Errorf("build Gitea %s: %w", version, err)
	}
	in.Built = time.Since(start)
	return in, nil
}

const completeMarker = ".complete"

func complete(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, completeMarker))
	return err == nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// build downloads the module, builds it in a writable copy and moves the
// binary and its assets into dir, marking it complete last.
func build(ctx context.Context, version, dir string) error {
	work, err := os.MkdirTemp(filepath.Dir(dir), "build-"+version+"-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(work)

	var mod struct{ Dir, Error string }
	out, err := goCommand(ctx, work, "mod", "download", "-json", "code.gitea.io/gitea@v"+version)
	if jerr := json.Unmarshal(out, &mod); jerr != nil || mod.Dir == "" {
		if err == nil {
			err = fmt.Errorf("no module directory in %q", firstLine(out))
		}
		if mod.Error != "" {
			err = errors.New(mod.Error)
		}
		return fmt.Errorf("go mod download code.gitea.io/gitea@v%s: %w", version, err)
	}
	src := filepath.Join(work, "src")
	// The module cache is read-only; go build wants to own its module dir.
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return fmt.Errorf("copy %s: %w", mod.Dir, err)
	}
	stage := filepath.Join(work, "out")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if out, err := goCommand(ctx, src, "build", "-tags", "sqlite sqlite_unlock_notify",
		"-ldflags", "-X main.Version="+version, "-o", filepath.Join(stage, "gitea"), "."); err != nil {
		return fmt.Errorf("go build: %w: %s", err, lastLines(out, 20))
	}
	for _, d := range []string{"templates", "options", "public"} {
		if err := os.CopyFS(filepath.Join(stage, d), os.DirFS(filepath.Join(src, d))); err != nil {
			return fmt.Errorf("copy %s: %w", d, err)
		}
	}
	if err := os.WriteFile(filepath.Join(stage, completeMarker), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	// Readable by everyone: tests running as root start Gitea's git hooks
	// and agents as other users.
	if err := os.Chmod(stage, 0o755); err != nil {
		return err
	}
	_ = os.RemoveAll(dir) // an interrupted earlier attempt
	if err := os.Rename(stage, dir); err != nil {
		return fmt.Errorf("move the build into the cache: %w", err)
	}
	return nil
}

// goCommand runs the go tool with a clean module environment: the build
// must not inherit the caller's module settings (GOFLAGS=-mod=vendor, a
// GOWORK) but keeps its proxy and caches.
func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=1")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	return buf.Bytes(), err
}

// binaryVersion asks a binary for its version ("" when it does not say).
func binaryVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	// "Gitea version 1.25.4 built with …"
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// lockFile holds an exclusive lock on path until the returned func runs.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another build of Gitea (%s): %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
