package main

import (
	"github.com/moziplus/mozi/cmd/mozi/internal/config"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/repository/task/build"
)

// taskBuilder is the task builder of the configuration, for the verbs that
// make a task outside mozi serve (task create, prompt render): the same
// defaults as the tasks mozi serve creates. Nobody observes it: a CLI
// process exports no metrics.
func taskBuilder(cfg *config.Config) *build.Builder {
	c := build.Config{BudgetPerHour: cfg.Webhook.TaskBudgetPerHour}
	if n := cfg.Dispatcher.MaxRetries; n != nil {
		c.MaxRetries = task.MaxRetriesSetting(*n)
	}
	return build.New(c)
}
