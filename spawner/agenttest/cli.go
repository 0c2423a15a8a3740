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
// and its Node into (default: openclaw in the CLIs' prefix).
const EnvCLIPrefix = "MOZI_OPENCLAW_PREFIX"

// EnvCLIsPrefix names the prefix .ci/install-agent-clis installed the other
// CLIs into (default: .cache/agent-clis in the checkout). Its bin/ is
// looked in after PATH, so the tests find them without PATH being set.
const EnvCLIsPrefix = "MOZI_AGENT_CLIS_PREFIX"

// clisPrefix is where .ci/install-agent-clis installs: $MOZI_AGENT_CLIS_PREFIX,
// else .cache/agent-clis at the root of the module the tests run in.
func clisPrefix() string {
	if p := os.Getenv(EnvCLIsPrefix); p != "" {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "agent-clis")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

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
	installed := clisPrefix()
	if installed != "" {
		dirs = append(dirs, filepath.Join(installed, "bin"))
	}
	if preset == "openclaw" {
		prefix := os.Getenv(EnvCLIPrefix)
		if prefix == "" && installed != "" {
			prefix = filepath.Join(installed, "openclaw")
		}
		if prefix != "" {
			// Its own prefix first: that is where its Node is.
			dirs = append([]string{filepath.Join(prefix, "bin")}, dirs...)
		}
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
