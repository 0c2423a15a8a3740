package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner"
)

func TestUsageLimitsSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		resumes    int
		credential string
		err        string
	}{
		{"defaults", "agents: [{login: coder1, command: [agent]}]\n", spawner.DefaultMaxResumesPerDay, "", ""},
		{"set", "usage_limits: {max_unattended_resumes_per_day: 5}\nagents: [{login: coder1, command: [agent], credential: team}]\n",
			5, "team", ""},
		{"negative", "usage_limits: {max_unattended_resumes_per_day: -1}\nagents: [{login: coder1, command: [agent]}]\n",
			0, "", "usage_limits.max_unattended_resumes_per_day: must be at least 1, got -1"},
		{"unknown key", "usage_limits: {max_resumes: 5}\nagents: [{login: coder1, command: [agent]}]\n", 0, "", "max_resumes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("mozi.yaml", []byte(tt.yaml))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.resumes, cfg.UsageLimits.MaxUnattendedResumesPerDay)
			assert.Equal(t, tt.credential, cfg.Agents[0].Credential)
		})
	}
}
