// Package podmantest starts a real podman API service for tests: one per
// test binary, with a private storage root, run root, temp and network
// configuration under a temporary directory, so it never sees or touches
// the machine's own containers or images. It builds a busybox image from
// scratch into it (no registry is needed).
//
// A package using it calls Main from its TestMain so the service and
// what it ran are gone when the tests end; the service also dies with
// the test binary (parent-death signal) if that is killed.
//
// Without podman the tests skip with a message, unless CI=true or
// MOZI_REQUIRE_PODMAN=1, where they fail.
package podmantest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// Image is the tag of the busybox test image: busybox's applets in /bin
// (PATH=/bin), a /tmp, nothing else.
const Image = "localhost/mozi-test-busybox:1"

var (
	mu      sync.Mutex
	svc     *service
	svcErr  error
	imageOK bool
)

type service struct {
	dir    string
	socket string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// Required reports whether podman must be there (CI).
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("MOZI_REQUIRE_PODMAN") == "1"
}

// Start returns the socket path of the test binary's podman service,
// starting it on first use. It skips tb when podman is not installed
// (fails under CI).
func Start(tb testing.TB) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if svc == nil && svcErr == nil {
		svc, svcErr = start()
	}
	if svcErr != nil {
		if errors.Is(svcErr, errMissing) && !Required() {
			tb.Skipf("podmantest: %v (install it with .ci/podman-setup; set MOZI_REQUIRE_PODMAN=1 to fail instead)", svcErr)
		}
		tb.Fatalf("podmantest: %v", svcErr)
	}
	return svc.socket
}

// StartWithImage is Start, and builds Image into the service once.
func StartWithImage(tb testing.TB) string {
	tb.Helper()
	socket := Start(tb)
	mu.Lock()
	defer mu.Unlock()
	if !imageOK {
		if err := buildImage(socket); err != nil {
			if errors.Is(err, errNoBusybox) && !Required() {
				tb.Skipf("podmantest: %v (set MOZI_REQUIRE_PODMAN=1 to fail instead)", err)
			}
			tb.Fatalf("podmantest: %v", err)
		}
		imageOK = true
	}
	return socket
}

// Main runs the tests and then stops the service, removing everything
// it ran and stored. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "podmantest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

var (
	errMissing   = errors.New("podman is not installed")
	errNoBusybox = errors.New("no static busybox (apt-get install busybox-static, or set MOZI_TEST_BUSYBOX)")
)

// Runtime is the OCI runtime the service uses: $MOZI_PODMAN_RUNTIME, else
// runc when installed, else podman's default. crun 1.8 (Debian 12)
// refuses a hybrid cgroup hierarchy — v1 controllers with some bound to
// v2 — as container-like machines have; runc runs there.
func Runtime() string {
	if r := os.Getenv("MOZI_PODMAN_RUNTIME"); r != "" {
		return r
	}
	if _, err := exec.LookPath("runc"); err == nil {
		return "runc"
	}
	return ""
}

// StorageDriver is the storage driver: $MOZI_PODMAN_STORAGE_DRIVER, else
// vfs, which mounts nothing, so the temporary root goes with a plain
// removal (the busybox image is 2 MB: copying it is cheap).
func StorageDriver() string {
	if d := os.Getenv("MOZI_PODMAN_STORAGE_DRIVER"); d != "" {
		return d
	}
	return "vfs"
}

func start() (*service, error) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		return nil, errMissing
	}
	dir, err := os.MkdirTemp("", "mozi-podman-")
	if err != nil {
		return nil, fmt.Errorf("start podman: %w", err)
	}
	s := &service{dir: dir, socket: filepath.Join(dir, "podman.sock"), exited: make(chan struct{}), log: filepath.Join(dir, "service.log")}
	args := []string{
		"--root", filepath.Join(dir, "root"),
		"--runroot", filepath.Join(dir, "runroot"),
		"--tmpdir", filepath.Join(dir, "tmp"),
		"--network-config-dir", filepath.Join(dir, "networks"),
		"--storage-driver", StorageDriver(),
		// No systemd here: podman manages the cgroups itself.
		"--cgroup-manager", "cgroupfs",
		"--events-backend", "file",
	}
	if r := Runtime(); r != "" {
		args = append(args, "--runtime", r)
	}
	args = append(args, "system", "service", "--time=0", "unix://"+s.socket)
	logf, err := os.Create(s.log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start podman: %w", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(podman, args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start podman: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	c := engine.New(s.socket)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Ping(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			err = fmt.Errorf("podman system service exited: %s", tail(s.log))
		default:
			if time.Now().After(deadline) {
				err = fmt.Errorf("podman system service did not answer within a minute: %v; %s", err, tail(s.log))
			} else {
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		s.stop()
		return nil, err
	}
}

// Stop removes every container of the service, stops it and removes its
// directory. Nothing to do when none was started.
func Stop() error {
	mu.Lock()
	defer mu.Unlock()
	if svc == nil {
		return nil
	}
	s := svc
	svc, svcErr, imageOK = nil, nil, false
	return s.stop()
}

func (s *service) stop() error {
	var errs []error
	// conmon keeps a container alive without the service: remove them
	// while it answers.
	c := engine.New(s.socket)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if list, err := c.ListContainers(ctx); err == nil {
		for _, ct := range list {
			if err := c.RemoveContainer(ctx, ct.ID); err != nil && !engine.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	// conmon runs `podman container cleanup` (with the service's
	// --root) when a container exits: it must be gone before the
	// directory goes, or it recreates parts of it.
	waitForHelpers(s.dir, 30*time.Second)
	unmountUnder(s.dir)
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove podman's test directory: %w", err))
	}
	return errors.Join(errs...)
}

// waitForHelpers waits until no process names dir on its command line,
// and kills those still there after timeout.
func waitForHelpers(dir string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		pids := helpers(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func helpers(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches whatever is still mounted below dir (an overlay
// storage driver's mounts), deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	if s == "" {
		return "(no output)"
	}
	return "its output: " + s
}

// buildImage builds Image from scratch: the machine's static busybox
// and a link per applet.
func buildImage(socket string) error {
	busybox, err := findBusybox()
	if err != nil {
		return err
	}
	ctxTar, err := buildContext(busybox)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return engine.New(socket).BuildImage(ctx, Image, bytes.NewReader(ctxTar))
}

// findBusybox finds a statically linked busybox (Debian's
// busybox-static), which runs in an image holding nothing else.
func findBusybox() (string, error) {
	for _, p := range []string{os.Getenv("MOZI_TEST_BUSYBOX"), "/bin/busybox", "/usr/bin/busybox"} {
		if p == "" {
			continue
		}
		if static, err := isStatic(p); err == nil && static {
			return p, nil
		}
	}
	return "", errNoBusybox
}

// isStatic reports whether the ELF file at p has no interpreter.
func isStatic(p string) (bool, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return false, err
	}
	return !bytes.Contains(b[:min(len(b), 4096)], []byte("/lib64/ld-linux")) && !bytes.Contains(b[:min(len(b), 4096)], []byte("/lib/ld-")), nil
}

// buildContext is the build context: a Dockerfile and rootfs/.
func buildContext(busybox string) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox's applets: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	dockerfile := []byte("FROM scratch\nCOPY rootfs/ /\nENV PATH=/bin\n")
	errs := []error{
		add(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), Typeflag: tar.TypeReg}, dockerfile),
		add(&tar.Header{Name: "rootfs/", Mode: 0o755, Typeflag: tar.TypeDir}, nil),
		add(&tar.Header{Name: "rootfs/bin/", Mode: 0o755, Typeflag: tar.TypeDir}, nil),
		add(&tar.Header{Name: "rootfs/tmp/", Mode: 0o1777, Typeflag: tar.TypeDir}, nil),
		add(&tar.Header{Name: "rootfs/bin/busybox", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}, bin),
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		errs = append(errs, add(&tar.Header{Name: "rootfs/bin/" + applet, Linkname: "busybox", Mode: 0o777, Typeflag: tar.TypeSymlink}, nil))
	}
	errs = append(errs, tw.Close())
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("write the build context: %w", err)
	}
	return buf.Bytes(), nil
}
