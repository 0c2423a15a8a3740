package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestImage is the name importImage gives the test image.
const TestImage = "docker.io/mozi/kubetest:1"

// importImage builds the test image from the host's binaries (no registry
// here): Debian's static busybox for the shell and its applets, and git
// with its HTTP transport and the shared libraries both load.
func importImage() (string, error) { return buildImage(TestImage) }

// ImageWith imports, once per name, the test image with more of this
// machine's programs in it, each at its own path with its libraries (a
// test binary built with -race, say). It returns the image's name.
func ImageWith(t testing.TB, name string, programs ...string) string {
	t.Helper()
	Start(t)
	imagesMu.Lock()
	defer imagesMu.Unlock()
	if !images[name] {
		if _, err := buildImage(name, programs...); err != nil {
			t.Fatalf("kubetest: image %s: %v", name, err)
		}
		images[name] = true
	}
	return name
}

var (
	imagesMu sync.Mutex
	images   = map[string]bool{}
)

func buildImage(name string, programs ...string) (string, error) {
	root, err := os.MkdirTemp("", "mozi-kubetest-rootfs-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(root) }()
	busybox := "/bin/busybox"
	if err := copyFile(busybox, filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		return "", fmt.Errorf("test image needs busybox-static: %w", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return "", fmt.Errorf("busybox --list: %w", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
				return "", err
			}
		}
	}
	gitExec, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("test image needs git: %w", err)
	}
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return "", err
	}
	bins := append([]string{gitBin, filepath.Join(strings.TrimSpace(string(gitExec)), "git-remote-http")}, programs...)
	for _, b := range bins {
		if err := copyWithLibs(b, root); err != nil {
			return "", err
		}
	}
	// git-remote-https is the same program.
	https := filepath.Join(root, strings.TrimSpace(string(gitExec)), "git-remote-https")
	if err := os.Symlink("git-remote-http", https); err != nil {
		return "", err
	}
	for _, d := range []string{"tmp", "etc", "root"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", err
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
		"etc/hosts":  "127.0.0.1 localhost\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	tar := root + ".tar"
	defer func() { _ = os.Remove(tar) }()
	for _, args := range [][]string{{"mkimage", root, name, tar}, {"import", tar}} {
		cmd := exec.Command(script, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", script, args[0], err, strings.TrimSpace(stderr.String()))
		}
	}
	return name, nil
}

// copyWithLibs copies the program at path into root at the same path, with
// the shared libraries and the loader ldd names for it.
func copyWithLibs(path, root string) error {
	if err := copyFile(path, filepath.Join(root, path), 0o755); err != nil {
		return err
	}
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return fmt.Errorf("ldd %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if !strings.HasPrefix(f, "/") {
				continue
			}
			if err := copyFile(f, filepath.Join(root, f), 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFile copies src's content (symbolic links followed) to dst.
func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}
