package config

import (
	"cmp"
	"time"

	"github.com/moziplus/mozi/webhook/rules"
)

// Reviews configures how an agent answers feedback on its pull requests:
// one turn per submitted review, and one per burst of loose comments.
type Reviews struct {
	// QuietPeriod is how long loose comments on an agent's pull request
	// wait for the next one before the author's one turn for all of them
	// (default rules.DefaultQuietPeriod, 60s). Submitted reviews do not
	// wait.
	QuietPeriod time.Duration `yaml:"quiet_period"`
}

func (r *Reviews) applyDefaults() {
	r.QuietPeriod = cmp.Or(r.QuietPeriod, rules.DefaultQuietPeriod)
}

func (r Reviews) validate(p *problems) {
	if r.QuietPeriod < time.Second {
		p.add("reviews.quiet_period", "must be at least 1s, got %s", r.QuietPeriod)
	}
}
