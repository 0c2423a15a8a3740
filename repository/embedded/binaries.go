package embedded

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries means no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql/*/bin: " +
	"install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql; macOS: brew install postgresql) " +
	"or point mozi at a server with MOZI_DATABASE_URL")

// debianRoot is where Debian and Ubuntu install one bin directory per major
// version; a variable so tests can point it elsewhere.
var debianRoot = "/usr/lib/postgresql"

// findBinDir returns the directory holding initdb and postgres: PATH first,
// then /usr/lib/postgresql/<major>/bin, newest first. When preferMajor is set
// (an existing cluster's PG_VERSION), a directory of that major version wins.
func findBinDir(preferMajor string) (string, error) {
	var candidates []string
	if initdb, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(initdb))
	}
	candidates = append(candidates, debianBinDirs()...)

	var usable []string
	for _, dir := range candidates {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			usable = append(usable, dir)
		}
	}
	if len(usable) == 0 {
		return "", ErrNoBinaries
	}
	if preferMajor != "" {
		for _, dir := range usable {
			if major, err := binMajor(dir); err == nil && major == preferMajor {
				return dir, nil
			}
		}
	}
	return usable[0], nil
}

// debianBinDirs lists /usr/lib/postgresql/<major>/bin, newest major first.
func debianBinDirs() []string {
	entries, err := os.ReadDir(debianRoot)
	if err != nil {
		return nil
	}
	type versioned struct {
		major float64
		dir   string
	}
	var found []versioned
	for _, e := range entries {
		major, err := strconv.ParseFloat(e.Name(), 64)
		if err != nil {
			continue
		}
		found = append(found, versioned{major, filepath.Join(debianRoot, e.Name(), "bin")})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].major > found[j].major })
	dirs := make([]string, len(found))
	for i, f := range found {
		dirs[i] = f.dir
	}
	return dirs
}

// binMajor asks the postgres binary in dir for its major version ("15").
func binMajor(dir string) (string, error) {
	cmd := exec.Command(filepath.Join(dir, "postgres"), "--version")
	cmd.Env = childEnv(os.Environ(), "")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s/postgres --version: %w", dir, err)
	}
	// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return "", fmt.Errorf("%s/postgres --version: unexpected output %q", dir, out)
	}
	version := fields[2]
	major, _, _ := strings.Cut(version, ".")
	return major, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
