package agenttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// EnvRequireCLIs set to 1 turns a missing CLI from a skipped test into a
// failed one (CI sets it after .ci/install-agent-clis).
const EnvRequireCLIs = "MOZI_REQUIRE_AGENT_CLIS"

// EnvCLIPrefix names the prefix .ci/install-agent-clis installed openclaw
// and its Node into (default /opt/mozi-agent-clis/openclaw).
const EnvCLIPrefix = "MOZI_OPENCLAW_PREFIX"

// DefaultOpenclawPrefix is where .ci/install-agent-clis puts openclaw and
// the Node it needs (openclaw wants Node 24.16 or newer).
const DefaultOpenclawPrefix = "/opt/mozi-agent-clis/openclaw"

// CLI is an agent CLI found on this machine.
type CLI struct {
	Preset string
	// Path is the executable.
	Path string
	// PATH to run it with: its own directory (and its Node's) first.
	PATH string
}

// executables of the presets the tests drive.
var executables = map[string]string{"claude-code": "claude", "codex": "codex", "opencode": "opencode", "openclaw": "openclaw"}

// FindCLI finds the CLI of the named preset on PATH or where
// .ci/install-agent-clis installs it. Without it the test is skipped, or
// fails when MOZI_REQUIRE_AGENT_CLIS=1.
func FindCLI(t testing.TB, preset string) CLI {
	t.Helper()
	c, err := findCLI(preset)
	if err != nil {
		if os.Getenv(EnvRequireCLIs) == "1" {
			t.Fatalf("%v (%s=1; run .ci/install-agent-clis)", err, EnvRequireCLIs)
		}
		t.Skipf("%v: run .ci/install-agent-clis to test the %s preset against the real CLI", err, preset)
	}
	return c
}

func findCLI(preset string) (CLI, error) {
	name, ok := executables[preset]
	if !ok {
		return CLI{}, fmt.Errorf("agenttest: no CLI known for preset %q", preset)
	}
	path := os.Getenv("PATH")
	dirs := filepath.SplitList(path)
	if preset == "openclaw" {
		prefix := os.Getenv(EnvCLIPrefix)
		if prefix == "" {
			prefix = DefaultOpenclawPrefix
		}
		// Its own prefix first: that is where its Node is.
		dirs = append([]string{filepath.Join(prefix, "bin")}, dirs...)
	}
	for _, dir := range append(dirs, "/usr/local/bin", "/usr/bin") {
		p := filepath.Join(dir, name)
		if !isExec(p) {
			continue
		}
		c := CLI{Preset: preset, Path: p, PATH: dir + string(os.PathListSeparator) + path}
		if preset == "openclaw" {
			if err := nodeAtLeast(c.PATH, 24, 16); err != nil {
				return CLI{}, fmt.Errorf("%s found but %w", p, err)
			}
		}
		return c, nil
	}
	if preset == "openclaw" {
		return CLI{}, fmt.Errorf("%s not found in %s nor on PATH", name, dirs[0])
	}
	return CLI{}, fmt.Errorf("%s not found on PATH", name)
}

// nodeAtLeast checks the node found on path.
func nodeAtLeast(path string, major, minor int) error {
	node := ""
	for _, dir := range filepath.SplitList(path) {
		if p := filepath.Join(dir, "node"); isExec(p) {
			node = p
			break
		}
	}
	if node == "" {
		return fmt.Errorf("no node on its PATH")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return fmt.Errorf("%s --version printed %q", node, v)
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%s --version printed %q", node, v)
	}
	if maj < major || maj == major && mnr < minor {
		return fmt.Errorf("its node is %s, older than %d.%d", v, major, minor)
	}
	return nil
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
