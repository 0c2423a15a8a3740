package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
)

// No container engine and no systemd run here: the deployment files are
// checked for what can go wrong without them — every file they mount or
// copy exists, the configurations they give mozi load and hold no secret,
// the sandbox keeps what it needs — and by docker-compose's and
// systemd-analyze's own checks when those are installed.

const deployDir = "../../deploy"

func TestComposeDeploymentIsConsistent(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
			SecurityOpt []string          `yaml:"security_opt"`
			CapDrop     []string          `yaml:"cap_drop"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))
	for _, name := range []string{"mozi", "postgres", "gitea", "prometheus", "grafana"} {
		assert.Contains(t, compose.Services, name)
	}
	for name, svc := range compose.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				_, err := os.Stat(filepath.Join(deployDir, src))
				assert.NoError(t, err, "service %s mounts %s", name, src)
			}
		}
	}

	mozi := compose.Services["mozi"]
	assert.Contains(t, mozi.Environment["MOZI_DATABASE_URL"], "@postgres:5432/",
		"mozi uses the compose PostgreSQL, not an embedded one in its volume")
	env := map[string]string{"MOZI_DATABASE_URL": "postgres://mozi@postgres/mozi"}
	for k, v := range mozi.Environment {
		if !strings.Contains(v, "${") {
			env[k] = v
		}
	}
	path := filepath.Join(deployDir, "compose", "mozi.yaml")
	cfg, err := config.Load(path, func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Empty(t, cfg.Webhook.Secrets, "%s holds no webhook secret: it comes from MOZI_WEBHOOK_SECRET(_FILE)", path)
	assert.Empty(t, cfg.Gitea.Token, "%s holds no Gitea token", path)
	assert.Equal(t, "0.0.0.0:8080", cfg.Listen)
	assert.Equal(t, "http://gitea:3000", cfg.Gitea.URL)
	assert.Contains(t, mozi.Ports, "8080:8080")

	// bubblewrap inside the container: see the comment in the compose file.
	if slices.ContainsFunc(cfg.Agents, func(a config.Agent) bool { return a.Sandbox == config.SandboxBwrap }) {
		for _, opt := range []string{"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} {
			assert.Contains(t, mozi.SecurityOpt, opt, "sandboxed agents need it in the mozi service")
		}
	}
	assert.Contains(t, mozi.SecurityOpt, "no-new-privileges:true")
	assert.Equal(t, []string{"ALL"}, mozi.CapDrop)

	prom, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(prom), `targets: ["mozi:8080"]`)
	assert.Contains(t, string(prom), "/etc/prometheus/alerts.yml")

	if compose, err := exec.LookPath("docker-compose"); err == nil {
		cmd := exec.Command(compose, "config", "--quiet")
		cmd.Dir = deployDir
		cmd.Env = append(os.Environ(), "MOZI_WEBHOOK_SECRET=s")
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "docker-compose config: %s", out)
	}
}

// dockerfile is the Dockerfile's instructions, continuation lines joined,
// comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || line == "" && cur.Len() == 0 {
			continue
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

func TestDockerfileBuildsWhatExists(t *testing.T) {
	t.Parallel()
	instructions := dockerfile(t)
	for _, in := range instructions {
		fields := strings.Fields(in)
		if len(fields) < 3 || fields[0] != "COPY" || strings.HasPrefix(fields[1], "--from") {
			continue
		}
		for _, src := range fields[1 : len(fields)-1] {
			if src != "." {
				assert.FileExists(t, filepath.Join("../..", src), "Dockerfile copies %s", src)
			}
		}
	}
	all := strings.Join(instructions, "\n")
	assert.Contains(t, all, "CGO_ENABLED=0", "the binary is static")
}

// The image runs the embedded default: its runtime stage has what mozi runs
// beside it, runs as a non-root user with its data in a volume, and its
// configuration holds no secret and no agent whose CLI it lacks.
func TestDockerfileRuntimeStage(t *testing.T) {
	t.Parallel()
	instructions := dockerfile(t)
	var runtime []string
	for _, in := range instructions {
		if strings.HasPrefix(in, "FROM ") {
			runtime = nil
		}
		runtime = append(runtime, in)
	}
	require.NotEmpty(t, runtime)

	var installed []string
	userAt, installAt := -1, -1
	env := map[string]string{}
	var volumes, entrypoint, healthcheck, configSrc string
	for i, in := range runtime {
		keyword, rest, _ := strings.Cut(in, " ")
		switch keyword {
		case "RUN":
			if _, pkgs, ok := strings.Cut(rest, "apt-get install"); ok {
				pkgs, _, _ = strings.Cut(pkgs, "&&")
				for _, p := range strings.Fields(pkgs) {
					if !strings.HasPrefix(p, "-") {
						installed = append(installed, p)
					}
				}
				installAt = i
			}
		case "USER":
			userAt = i
			assert.Equal(t, "mozi", strings.TrimSpace(rest), "the image runs as mozi, not root")
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		case "VOLUME":
			volumes = rest
		case "ENTRYPOINT":
			entrypoint = rest
		case "HEALTHCHECK":
			healthcheck = rest
		case "COPY":
			if f := strings.Fields(rest); len(f) == 2 && f[1] == "/etc/mozi/mozi.yaml" {
				configSrc = f[0]
			}
		}
	}
	for _, pkg := range []string{"ca-certificates", "git", "bubblewrap", "util-linux", "tini"} {
		assert.Contains(t, installed, pkg, "the runtime stage installs %s", pkg)
	}
	assert.True(t, slices.ContainsFunc(installed, regexp.MustCompile(`^postgresql-1[5-9]$`).MatchString),
		"the runtime stage installs a PostgreSQL server for the embedded database: %v", installed)
	assert.Greater(t, userAt, installAt, "USER mozi comes after the packages are installed")
	assert.Contains(t, entrypoint, "tini", "tini is PID 1")
	assert.Equal(t, "/etc/mozi/mozi.yaml", env["MOZI_CONFIG"])
	require.NotEmpty(t, env["MOZI_DATA_DIR"])
	assert.Contains(t, volumes, env["MOZI_DATA_DIR"], "the data directory is a volume")
	assert.Contains(t, healthcheck, "MOZI_LISTEN", "the HEALTHCHECK follows MOZI_LISTEN")
	assert.NotContains(t, healthcheck, ":8080/", "the HEALTHCHECK does not hardcode the port")

	require.NotEmpty(t, configSrc, "the image has a configuration at /etc/mozi/mozi.yaml")
	cfg, err := config.Load(filepath.Join("../..", configSrc), func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Empty(t, cfg.Webhook.Secrets, "no webhook secret is baked into the image: mozi serve refuses to start until one is given")
	assert.Empty(t, cfg.Gitea.Token)
	assert.Empty(t, cfg.Database.URL, "the image runs the embedded database unless MOZI_DATABASE_URL is set")
	for _, a := range cfg.Agents {
		assert.Equal(t, "shell", a.Preset, "agent %s needs a CLI the image does not have", a.Login)
	}
}

// unit reads a systemd unit: the directives as "Section.Key" → values, and
// the commands of its header comment (lines "#   cmd").
func unit(t *testing.T, path string) (directives map[string][]string, header []string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	directives = map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#   ") && section == "":
			header = append(header, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		case strings.HasPrefix(line, "#"), line == "":
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: %q", path, line)
			directives[section+"."+k] = append(directives[section+"."+k], v)
		}
	}
	require.NoError(t, sc.Err())
	return directives, header
}

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(deployDir, "systemd", "mozi.service")
	d, header := unit(t, path)
	one := func(key string) string { return strings.Join(d[key], " ") }

	// The install steps in the header work in order: /etc/mozi exists
	// before anything is installed into it, and the Documentation= files
	// are installed from files that exist.
	created := -1
	for i, cmd := range header {
		if strings.HasPrefix(cmd, "install -d") && strings.HasSuffix(cmd, " /etc/mozi") {
			created = i
		}
		if strings.Contains(cmd, " /etc/mozi/") && strings.HasPrefix(cmd, "install ") {
			assert.True(t, created >= 0 && created < i, "the header installs into /etc/mozi before creating it: %q", cmd)
		}
	}
	// The configuration the header installs holds no secret.
	i := slices.IndexFunc(header, func(cmd string) bool {
		return strings.HasPrefix(cmd, "install ") && strings.HasSuffix(cmd, " /etc/mozi/mozi.yaml")
	})
	require.GreaterOrEqual(t, i, 0, "the header installs /etc/mozi/mozi.yaml")
	fields := strings.Fields(header[i])
	cfg, err := config.Load(filepath.Join("../..", fields[len(fields)-2]), func(string) string { return "" })
	require.NoError(t, err)
	assert.Empty(t, cfg.Webhook.Secrets, "the service's configuration holds no webhook secret")
	assert.Empty(t, cfg.Gitea.Token)

	require.NotEmpty(t, d["Unit.Documentation"])
	for _, doc := range strings.Fields(one("Unit.Documentation")) {
		file, ok := strings.CutPrefix(doc, "file:///usr/share/doc/mozi/")
		if !ok {
			continue
		}
		assert.FileExists(t, filepath.Join("../../docs", file))
		assert.True(t, slices.ContainsFunc(header, func(cmd string) bool {
			return strings.HasPrefix(cmd, "install ") && strings.Contains(cmd, "/usr/share/doc/mozi") &&
				strings.Contains(cmd, "docs/"+file)
		}), "the header installs docs/%s, which Documentation= names", file)
	}

	// The hardening leaves the agents' sandbox and the embedded PostgreSQL
	// what they need (see the comments in the unit).
	assert.Equal(t, "mozi", one("Service.StateDirectory"))
	assert.True(t, slices.ContainsFunc(d["Service.Environment"], func(e string) bool {
		return e == "MOZI_DATA_DIR=%S/mozi" || e == "MOZI_DATA_DIR=/var/lib/mozi"
	}), "the data dir is the state directory: %v", d["Service.Environment"])
	assert.Equal(t, "strict", one("Service.ProtectSystem"))
	ns := strings.Fields(one("Service.RestrictNamespaces"))
	for _, want := range []string{"user", "mnt", "pid", "ipc", "uts", "cgroup"} {
		assert.Contains(t, ns, want, "bubblewrap creates a %s namespace", want)
	}
	assert.Empty(t, d["Service.PrivateUsers"], "no PrivateUsers=: bubblewrap maps mozi's uid itself")
	assert.NotEqual(t, "yes", one("Service.ProtectHostname"), "bubblewrap sets the sandbox's hostname")
	assert.NotEqual(t, "pid", one("Service.ProcSubset"), "bubblewrap reads /proc/sys/kernel/overflowuid")
	assert.NotEqual(t, "yes", one("Service.MemoryDenyWriteExecute"), "Node.js agent CLIs need a JIT")
	filter := strings.Fields(one("Service.SystemCallFilter"))
	for _, call := range []string{"mount", "umount2", "pivot_root", "sethostname"} {
		assert.True(t, slices.Contains(filter, call) || call != "sethostname" && slices.Contains(filter, "@mount"),
			"bubblewrap calls %s", call)
	}

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		return
	}
	// systemd-analyze verify wants the program to exist: check a copy that
	// runs an executable that does.
	dir := t.TempDir()
	exe := filepath.Join(dir, "mozi")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	copyPath := filepath.Join(dir, "mozi.service")
	require.NoError(t, os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(data), "=/usr/local/bin/mozi", "="+exe)), 0o644))
	out, err := exec.Command("systemd-analyze", "verify", copyPath).CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify: %s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warns")

	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=30", path).CombinedOutput()
	if strings.Contains(string(out), "unrecognized option") {
		return // systemd older than 250
	}
	assert.NoError(t, err, "systemd-analyze security rates the unit above 3.0:\n%s", out)
}
