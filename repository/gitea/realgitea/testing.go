package realgitea

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Shared state of a test binary: one Gitea for all its tests, each test
// with repositories of its own.
var (
	prepareOnce sync.Once
	install     Install
	prepareErr  error

	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Prepare finds or builds Gitea. Call it from TestMain before m.Run: a
// cold build takes minutes, more than go test's default timeout, which
// only starts counting at m.Run. Its error is reported by Shared and Need.
func Prepare() {
	prepareOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		install, prepareErr = Find(ctx, func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		})
		if install.Built > 0 {
			fmt.Fprintf(os.Stderr, "realgitea: built Gitea %s in %s\n", install.Version, install.Built.Round(time.Second))
		}
	})
}

// InCI reports whether the tests run in CI, where nothing may skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Need stops t when err is set: a failure under CI (one line), a skip on
// a developer's machine.
func Need(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s (skipped outside CI): %v", what, err)
}

// Shared returns the test binary's Gitea, started at the first call and
// stopped by StopShared (TestMain, after m.Run).
func Shared(t testing.TB) *Server {
	t.Helper()
	Prepare()
	Need(t, "Gitea unavailable", prepareErr)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared, sharedErr = Start(ctx, install, Options{})
		if sharedErr == nil {
			t.Logf("realgitea: Gitea %s at %s started in %s", install.Version, shared.URL, shared.Started.Round(time.Millisecond))
		}
	}
	Need(t, "start Gitea", sharedErr)
	return shared
}

// Own starts a Gitea for t alone (one it may stop and resume), closed
// when t ends.
func Own(t testing.TB, opts Options) *Server {
	t.Helper()
	Prepare()
	Need(t, "Gitea unavailable", prepareErr)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, install, opts)
	Need(t, "start Gitea", err)
	t.Cleanup(s.Close)
	return s
}

// StopShared stops the shared Gitea, if one was started.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Close()
		shared = nil
	}
}

// Installed is the Gitea Prepare found (zero before, or when it failed).
func Installed() (Install, error) {
	Prepare()
	return install, prepareErr
}
