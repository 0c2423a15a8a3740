//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/spawner/backend/container/podmantest"
	"github.com/moziplus/mozi/spawner/backend/kube/kubetest"
)

// The mozi binary under test, built once by TestMain.
var (
	moziBin      string
	moziBuildErr error
)

func TestMain(m *testing.M) {
	if os.Getenv(agentRoleEnv) != "" {
		os.Exit(agentMain())
	}
	// Both take minutes when cold: before m.Run, so go test's timeout
	// counts only the tests.
	realgitea.Prepare()
	dir, err := os.MkdirTemp("", "mozi-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	moziBin, moziBuildErr = buildMozi(dir)
	code := pgtest.Main(m)
	realgitea.StopShared()
	if err := podmantest.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
	kubetest.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildMozi builds cmd/mozi, with the race detector when this test binary
// has it, so the suite checks mozi's own concurrency too.
func buildMozi(dir string) (string, error) {
	bin := filepath.Join(dir, "mozi")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	cmd := exec.Command("go", append(args, "..")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cmd/mozi: %v: %s", err, out)
	}
	fmt.Fprintf(os.Stderr, "e2e: built mozi (race=%v) in %s\n", raceEnabled, time.Since(start).Round(100*time.Millisecond))
	// Readable by everyone: mozi runs agents as another user, and they
	// run nothing of mozi's, but the directory must be traversable for
	// the agent binaries beside it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return bin, nil
}
