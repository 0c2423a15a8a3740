package container

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
	"github.com/moziplus/mozi/spawner/backend/container/engine"
)

// spec is the container a step runs in.
func (b *Backend) spec(image string, w backend.Where, binds []backend.Bind, s backend.Step) engine.ContainerConfig {
	stdin := s.Stdin != nil
	init := !b.cfg.NoInit
	cfg := engine.ContainerConfig{
		Image: image,
		// The agent's command runs as written, whatever entrypoint the
		// image has.
		Entrypoint:   []string{""},
		Cmd:          s.Argv,
		Env:          containerEnv(s.Env, binds),
		WorkingDir:   w.Dir,
		User:         b.cfg.User,
		Labels:       b.labels(s.TaskID, s.Attempt),
		AttachStdout: true,
		AttachStderr: true,
		AttachStdin:  stdin,
		OpenStdin:    stdin,
		StdinOnce:    stdin,
		HostConfig: engine.HostConfig{
			NetworkMode: b.cfg.Network,
			Mounts:      mounts(binds),
			Init:        &init,
			// setuid binaries of the image cannot give the agent more
			// than its user has.
			SecurityOpt: []string{"no-new-privileges"},
		},
	}
	limits(&cfg.HostConfig, s.Agent.Limits)
	return cfg
}

// labels say whose run a container is.
func (b *Backend) labels(task int64, attempt int) map[string]string {
	return map[string]string{
		backend.LabelTask:    strconv.FormatInt(task, 10),
		backend.LabelAttempt: strconv.Itoa(attempt),
		backend.LabelOwner:   b.cfg.Owner,
		backend.LabelScope:   b.cfg.Scope,
	}
}

// containerName names a run's container for people reading `podman ps`;
// the suffix keeps a retried start from colliding with a leftover.
func containerName(task int64, attempt int) string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return "mozi-" + strconv.FormatInt(task, 10) + "-" + strconv.Itoa(attempt) + "-" + hex.EncodeToString(r[:])
}

// mounts binds each host path at the same path.
func mounts(binds []backend.Bind) []engine.Mount {
	out := make([]engine.Mount, 0, len(binds))
	for _, bd := range binds {
		out = append(out, engine.Mount{Type: "bind", Source: bd.Path, Target: bd.Path, ReadOnly: bd.ReadOnly})
	}
	return out
}

// containerEnv is the agent's environment as the container gets it.
// PATH goes: the spawner's is the host's, which names host directories;
// the image's own PATH applies instead (an agent cannot set its own
// PATH in a container). HOME stays only when the container sees it
// (bound in); otherwise the image's, or the engine's default, applies.
func containerEnv(env []string, binds []backend.Bind) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH":
			continue
		case "HOME":
			if !within(v, binds) {
				continue
			}
		}
		out = append(out, kv)
	}
	return out
}

// within reports whether path is a bound path or below one.
func within(path string, binds []backend.Bind) bool {
	if path == "" || !filepath.IsAbs(path) {
		return false
	}
	path = filepath.Clean(path)
	for _, bd := range binds {
		p := filepath.Clean(bd.Path)
		if path == p || strings.HasPrefix(path, p+"/") || p == "/" {
			return true
		}
	}
	return false
}

// limits sets the run's limits: memory and processes as the cgroup
// bounds them, open files, processes and CPU time as rlimits, like a
// local run's. An rlimit the agent has none of is mozi's own hard limit,
// as a local run would inherit: podman as root otherwise asks for
// higher ones than a process without CAP_SYS_RESOURCE may set, and the
// start fails.
func limits(h *engine.HostConfig, l backend.Limits) {
	if l.MemoryBytes > 0 {
		h.Memory, h.MemorySwap = l.MemoryBytes, l.MemoryBytes
	}
	rlimit := func(name string, res int, v int64) {
		if v <= 0 {
			var ok bool
			if v, ok = hostLimit(res); !ok {
				return
			}
		}
		h.Ulimits = append(h.Ulimits, engine.Ulimit{Name: name, Soft: v, Hard: v})
	}
	if l.Processes > 0 {
		n := int64(l.Processes)
		h.PidsLimit = &n
	}
	rlimit("nproc", rlimitNproc, int64(l.Processes))
	rlimit("nofile", syscall.RLIMIT_NOFILE, int64(l.OpenFiles))
	if l.CPUTime > 0 {
		secs := int64(max(l.CPUTime/time.Second, 1))
		h.Ulimits = append(h.Ulimits, engine.Ulimit{Name: "cpu", Soft: secs, Hard: secs})
	}
}

// rlimitNproc is RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6
