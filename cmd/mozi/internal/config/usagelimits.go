package config

import (
	"cmp"

	"github.com/moziplus/mozi/spawner"
)

// UsageLimits configures what mozi does when an agent's account hits a
// usage limit (docs/loop/usage-limits.md).
type UsageLimits struct {
	// MaxUnattendedResumesPerDay caps how often, per day (UTC), the agents
	// of one credential resume by themselves at a limit's reset; past it
	// the task waits for a person, mozi task resume (default 3).
	MaxUnattendedResumesPerDay int `yaml:"max_unattended_resumes_per_day"`
}

func (c *Config) applyUsageLimitDefaults() {
	u := &c.UsageLimits
	u.MaxUnattendedResumesPerDay = cmp.Or(u.MaxUnattendedResumesPerDay, spawner.DefaultMaxResumesPerDay)
}

func (c *Config) validateUsageLimits(p *problems) {
	if n := c.UsageLimits.MaxUnattendedResumesPerDay; n < 1 {
		p.add("usage_limits.max_unattended_resumes_per_day", "must be at least 1, got %d", n)
	}
}
