package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moziplus/mozi/cmd/mozi/internal/config"
)

// No container engine runs here: the compose deployment is checked for
// what can go wrong without one — every file it mounts exists, the
// configuration it gives mozi loads, Prometheus scrapes the port mozi
// listens on — and by docker-compose's own validation when it is installed.
func TestComposeDeploymentIsConsistent(t *testing.T) {
	const dir = "../../deploy"
	data, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			Ports       []string          `yaml:"ports"`
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
				_, err := os.Stat(filepath.Join(dir, src))
				assert.NoError(t, err, "service %s mounts %s", name, src)
			}
		}
	}

	mozi := compose.Services["mozi"]
	env := map[string]string{"MOZI_WEBHOOK_SECRET": "s", "MOZI_DATABASE_URL": "postgres://mozi@postgres/mozi"}
	for k, v := range mozi.Environment {
		if !strings.Contains(v, "${") {
			env[k] = v
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "compose", "mozi.yaml"), func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:8080", cfg.Listen)
	assert.Equal(t, "http://gitea:3000", cfg.Gitea.URL)
	assert.Contains(t, mozi.Ports, "8080:8080")

	prom, err := os.ReadFile(filepath.Join(dir, "prometheus", "prometheus.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(prom), `targets: ["mozi:8080"]`)
	assert.Contains(t, string(prom), "/etc/prometheus/alerts.yml")

	if compose, err := exec.LookPath("docker-compose"); err == nil {
		cmd := exec.Command(compose, "config", "--quiet")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MOZI_WEBHOOK_SECRET=s")
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "docker-compose config: %s", out)
	}
}

func TestDockerfileBuildsWhatExists(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "COPY" || strings.HasPrefix(fields[1], "--from") {
			continue
		}
		for _, src := range fields[1 : len(fields)-1] {
			if src != "." {
				assert.FileExists(t, filepath.Join("../..", src), "Dockerfile copies %s", src)
			}
		}
	}
	assert.Contains(t, string(data), "USER mozi", "the image runs as a non-root user")
	assert.Contains(t, string(data), "CGO_ENABLED=0", "the binary is static")
}
