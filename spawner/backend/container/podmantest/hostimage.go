package podmantest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// HostImage builds, once per tag, an image made of files of this machine:
// each path (a file, or a directory taken whole) at the same place, the
// shared libraries of every executable among them (as ldd finds them), a
// /tmp and an /etc/passwd that knows root and nobody. It is how tests run
// a dynamically linked program (a test binary built with -race, git) in a
// container without a registry. It returns the tag.
func HostImage(tb testing.TB, socket, tag string, paths ...string) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if hostImages[tag] {
		return tag
	}
	ctxTar, err := hostContext(paths)
	if err != nil {
		tb.Fatalf("podmantest: image %s: %v", tag, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := engine.New(socket).BuildImage(ctx, tag, bytes.NewReader(ctxTar)); err != nil {
		tb.Fatalf("podmantest: build %s: %v", tag, err)
	}
	hostImages[tag] = true
	return tag
}

var hostImages = map[string]bool{}

// lddLine is a library ldd names: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)"
// or the loader's "/lib64/ld-linux-x86-64.so.2 (0x…)".
var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// libraries lists the shared libraries an executable needs (none for a
// static one, or a file that is not an executable).
func libraries(path string) []string {
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return nil
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := lddLine.FindStringSubmatch(sc.Text()); m != nil {
			libs = append(libs, m[1])
		}
	}
	return libs
}

// hostContext is the build context: the files under rootfs/, and a
// Dockerfile copying them.
func hostContext(paths []string) ([]byte, error) {
	files := map[string]bool{}
	var walkErr error
	// A symlink needs its target at the path it names (the loader's link
	// names /lib/…, which is a directory in the image), and that target's
	// own.
	var addFile func(p string)
	addFile = func(p string) {
		if files[p] {
			return
		}
		files[p] = true
		if st, err := os.Lstat(p); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if target, err := os.Readlink(p); err == nil {
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(p), target)
				}
				addFile(target)
			}
		}
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			found, err := exec.LookPath(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			p = found
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			addFile(p)
			continue
		}
		walkErr = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				addFile(q)
			}
			return err
		})
		if walkErr != nil {
			return nil, walkErr
		}
	}
	// Libraries of every executable, to a fixed point (a library's own).
	for done := map[string]bool{}; ; {
		var next []string
		for f := range files {
			if done[f] {
				continue
			}
			done[f] = true
			if st, err := os.Stat(f); err == nil && st.Mode()&0o111 != 0 || strings.Contains(f, ".so") {
				next = append(next, libraries(f)...)
			}
		}
		if len(next) == 0 {
			break
		}
		for _, l := range next {
			addFile(l)
		}
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "/" || dirs[dir] {
			return nil
		}
		if err := mkdirs(filepath.Dir(dir)); err != nil {
			return err
		}
		dirs[dir] = true
		mode := int64(0o755)
		if dir == "/tmp" {
			mode = 0o1777
		}
		return tw.WriteHeader(&tar.Header{Name: "rootfs" + dir + "/", Mode: mode, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)})
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group := "root:x:0:\nnogroup:x:65534:\n"
	for _, f := range []struct{ name, body string }{{"/etc/passwd", passwd}, {"/etc/group", group}} {
		if err := mkdirs(filepath.Dir(f.name)); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "rootfs" + f.name, Mode: 0o644, Size: int64(len(f.body)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return nil, err
		}
	}
	if err := mkdirs("/tmp"); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	slices.Sort(names)
	// Hard links stay links: git's helpers are one binary under many names.
	inodes := map[uint64]string{}
	for _, f := range names {
		st, err := os.Lstat(f)
		if err != nil {
			return nil, err
		}
		if err := mkdirs(filepath.Dir(f)); err != nil {
			return nil, err
		}
		h := &tar.Header{Name: "rootfs" + f, Mode: int64(st.Mode().Perm()), ModTime: time.Unix(0, 0)}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(f)
			if err != nil {
				return nil, err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		case !st.Mode().IsRegular():
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			if first, seen := inodes[sys.Ino]; seen {
				h.Typeflag, h.Linkname = tar.TypeLink, "rootfs"+first
				if err := tw.WriteHeader(h); err != nil {
					return nil, err
				}
				continue
			}
			inodes[sys.Ino] = f
		}
		body, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(body); err != nil {
			return nil, err
		}
	}
	dockerfile := []byte("FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write the build context: %w", err)
	}
	return buf.Bytes(), nil
}

// Containers lists the service's containers that carry every label
// ("key=value" or "key"), as "id image state".
func Containers(tb testing.TB, socket string, labels ...string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := engine.New(socket).ListContainers(ctx, labels...)
	if err != nil {
		tb.Fatalf("podmantest: list containers: %v", err)
	}
	out := make([]string, 0, len(list))
	for _, c := range list {
		out = append(out, c.ID[:min(12, len(c.ID))]+" "+c.Image+" "+c.State)
	}
	return out
}
