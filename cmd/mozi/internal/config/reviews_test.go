package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/webhook/rules"
)

func TestReviewsQuietPeriod(t *testing.T) {
	const agents = "agents: [{login: coder1, command: [agent]}]\n"
	for _, tc := range []struct {
		name, body string
		want       time.Duration
		problem    string
	}{
		{"default", agents, rules.DefaultQuietPeriod, ""},
		{"set", "reviews: {quiet_period: 2m30s}\n" + agents, 150 * time.Second, ""},
		{"too short", "reviews: {quiet_period: 200ms}\n" + agents, 0,
			"mozi.yaml:1: reviews.quiet_period: must be at least 1s, got 200ms"},
		{"negative", "reviews:\n  quiet_period: -5s\n" + agents, 0,
			"mozi.yaml:2: reviews.quiet_period: must be at least 1s, got -5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("mozi.yaml", []byte(tc.body))
			if tc.problem != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.problem)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg.Reviews.QuietPeriod)
		})
	}
}
