package config

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/spawner/progress"
)

// Progress configures what people see in Gitea while mozi works: a 👀
// reaction on what triggered a task and one status comment per issue,
// edited in place as the work moves.
type Progress struct {
	// Enabled turns it on (default true).
	Enabled *bool `yaml:"enabled"`
	// MinEditInterval is the least time between two edits of one status
	// comment (default 10s): states in between are coalesced, the last
	// one is always shown.
	MinEditInterval time.Duration `yaml:"min_edit_interval"`
	// DisabledRepos (owner/name) get neither reactions nor status
	// comments.
	DisabledRepos []string `yaml:"disabled_repos"`
}

// On reports whether repo gets reactions and a status comment.
func (p Progress) On(repo string) bool {
	if p.Enabled != nil && !*p.Enabled {
		return false
	}
	return !slices.ContainsFunc(p.DisabledRepos, func(r string) bool { return strings.EqualFold(r, repo) })
}

func (p *Progress) applyDefaults() {
	if p.Enabled == nil {
		yes := true
		p.Enabled = &yes
	}
	p.MinEditInterval = cmp.Or(p.MinEditInterval, progress.DefaultMinEditInterval)
}

func (c *Config) validateProgress(pr *problems) {
	if c.Progress.MinEditInterval < 0 {
		pr.add("progress.min_edit_interval", "must not be negative, got %s", c.Progress.MinEditInterval)
	}
	for _, repo := range c.Progress.DisabledRepos {
		if o, n, ok := strings.Cut(repo, "/"); !ok || o == "" || n == "" || strings.Contains(n, "/") {
			pr.add("progress.disabled_repos", "%q is not owner/name", repo)
		}
	}
}
