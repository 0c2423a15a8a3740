package config

import (
	"cmp"

	"github.com/moziplus/mozi/repository/task"
)

// CI configures how a pull request's commit statuses decide its "done": the
// repair rounds its author gets while it is red, and what their prompts
// carry (docs/loop/ci-and-questions.md).
type CI struct {
	// MaxRepairRounds is how many ci_failure tasks a pull request gets;
	// red after them, its author's task waits for a person (default 2).
	MaxRepairRounds int `yaml:"max_repair_rounds"`
	// LogTailLines is how many last lines of a failed Gitea Actions job's
	// log a repair round's prompt carries (default 80).
	LogTailLines int `yaml:"log_tail_lines"`
}

func (c *CI) applyDefaults() {
	c.MaxRepairRounds = cmp.Or(c.MaxRepairRounds, task.DefaultMaxRepairRounds)
	c.LogTailLines = cmp.Or(c.LogTailLines, task.DefaultLogTailLines)
}

func (c *CI) validate(p *problems) {
	if c.MaxRepairRounds < 1 {
		p.add("ci.max_repair_rounds", "must be at least 1, got %d", c.MaxRepairRounds)
	}
	if c.LogTailLines < 1 || c.LogTailLines > 10000 {
		p.add("ci.log_tail_lines", "must be between 1 and 10000, got %d", c.LogTailLines)
	}
}
