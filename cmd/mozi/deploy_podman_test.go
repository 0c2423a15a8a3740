package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// qualifiedImage is a registry host, a path and a tag: podman pulls it
// without unqualified-search registries in registries.conf.
var qualifiedImage = regexp.MustCompile(`^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+$`)

// The images the Dockerfile and the compose file pull are named in full,
// and the image's user has a group of the same number (podman and Docker
// alike then show 10001:10001 for files in the volume).
func TestImagesWorkWithPodman(t *testing.T) {
	t.Parallel()
	var user, group string
	for _, in := range dockerfile(t) {
		keyword, rest, _ := strings.Cut(in, " ")
		switch keyword {
		case "FROM":
			image := strings.Fields(rest)[0]
			assert.Regexp(t, qualifiedImage, image, "the Dockerfile pulls %s by its full name", image)
		case "RUN":
			if m := regexp.MustCompile(`groupadd [^&]*--gid (\d+) mozi`).FindStringSubmatch(rest); m != nil {
				group = m[1]
			}
			if m := regexp.MustCompile(`useradd [^&]*--uid (\d+) --gid (\d+) `).FindStringSubmatch(rest); m != nil {
				user = m[1]
				assert.Equal(t, group, m[2], "useradd puts mozi in its own group")
			}
		}
	}
	require.NotEmpty(t, user, "the Dockerfile creates the user mozi with a fixed uid and gid")
	assert.Equal(t, user, group, "the user's uid and its group's gid are the same number")

	data, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image string         `yaml:"image"`
			Build map[string]any `yaml:"build"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))
	for name, svc := range compose.Services {
		if svc.Build != nil {
			continue // built here: podman names it localhost/…
		}
		assert.Regexp(t, qualifiedImage, svc.Image, "service %s pulls its image by its full name", name)
	}
}
