package embedded

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// runUser is the unprivileged account PostgreSQL runs as when mozi is root.
type runUser struct {
	name   string
	home   string
	uid    int
	gid    int
	groups []uint32
}

// resolveRunUser returns nil when mozi is not root (PostgreSQL runs as mozi's
// own user), else the unprivileged user to run it as.
func resolveRunUser(name string) (*runUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: mozi runs as root and PostgreSQL refuses to, but user %q does not exist: create it (useradd --system %s), run mozi as a normal user, or set MOZI_DATABASE_URL", name, name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return nil, fmt.Errorf("embedded postgres: user %q is root; PostgreSQL needs an unprivileged user", name)
	}
	ru := &runUser{name: name, home: u.HomeDir, uid: uid, gid: gid}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.Atoi(g); err == nil {
			ru.groups = append(ru.groups, uint32(n))
		}
	}
	return ru, nil
}

func (u *runUser) credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: u.groups}
}

func (u *runUser) inGroup(gid uint32) bool {
	if gid == uint32(u.gid) {
		return true
	}
	for _, g := range u.groups {
		if g == gid {
			return true
		}
	}
	return false
}

// canReach checks that every ancestor of dir can be traversed by the user,
// so that PostgreSQL, running as that user, can open its data directory.
func (u *runUser) canReach(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := st.Mode().Perm()
		var allowed bool
		switch {
		case int(sys.Uid) == u.uid:
			allowed = perm&0o100 != 0
		case u.inGroup(sys.Gid):
			allowed = perm&0o010 != 0
		default:
			allowed = perm&0o001 != 0
		}
		if !allowed {
			return fmt.Errorf("directory %s (mode %04o) is not reachable by user %s", p, perm, u.name)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
