package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SystemStateDir is where a root mozi keeps its cluster when the usual
// per-user location is not reachable by the unprivileged postgres user.
const SystemStateDir = "/var/lib/mozi"

// StateDir picks the state directory: the explicit one (--data-dir) if
// given, else $XDG_STATE_HOME/mozi, else ~/.local/state/mozi. As root, a
// per-user default that PostgreSQL's user could not reach (root's home is
// usually mode 0700) is replaced by SystemStateDir; note says so.
func StateDir(explicit string, getenv func(string) string, runAs string) (dir, note string, err error) {
	if explicit != "" {
		abs, err := filepath.Abs(explicit)
		if err != nil {
			return "", "", fmt.Errorf("resolve --data-dir: %w", err)
		}
		return abs, "", nil
	}
	base := getenv("XDG_STATE_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			var herr error
			if home, herr = os.UserHomeDir(); herr != nil {
				return "", "", errors.New("cannot find a state directory: set XDG_STATE_HOME or HOME, or pass --data-dir")
			}
		}
		base = filepath.Join(home, ".local", "state")
	}
	dir = filepath.Join(base, "mozi")
	user, err := resolveRunUser(runAs)
	if err != nil || user == nil {
		return dir, "", err
	}
	if reachErr := user.canReach(existingAncestor(dir)); reachErr != nil {
		return SystemStateDir, fmt.Sprintf("%s: using %s instead of %s", reachErr, SystemStateDir, dir), nil
	}
	return dir, "", nil
}

// existingAncestor returns the deepest existing directory on dir's path,
// joined with a child name so that canReach checks that directory too; the
// directories mozi creates below it are made reachable (0755 or chown).
func existingAncestor(dir string) string {
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			return filepath.Join(p, "x")
		}
		if p == filepath.Dir(p) {
			return filepath.Join(p, "x")
		}
	}
}
