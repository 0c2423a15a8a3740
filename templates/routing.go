// Package templates holds the toolchain templates: per action type, and for
// issue_assigned per business type, the steps an agent follows and the
// [Action Report] it must post. It also owns business-type routing.
package templates

import (
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// typeLabels maps type/* labels to business types (SPEC §5).
var typeLabels = []struct {
	label string
	bt    task.BusinessType
}{
	{"type/feat", task.BusinessFeature},
	{"type/impl", task.BusinessImpl},
	{"type/bug", task.BusinessBug},
	{"type/docs", task.BusinessDocs},
	{"type/refactor", task.BusinessRefactor},
	{"type/test", task.BusinessTest},
}

// RouteBusinessType decides an issue_assigned task's business type from
// the labels: any label containing "infrastructure" first, then the
// type/* labels in the order feat, impl, bug, docs, refactor, test; feature
// by default.
func RouteBusinessType(labels []string) task.BusinessType {
	for _, l := range labels {
		if strings.Contains(strings.ToLower(l), "infrastructure") {
			return task.BusinessInfrastructure
		}
	}
	for _, tl := range typeLabels {
		for _, l := range labels {
			if strings.EqualFold(strings.TrimSpace(l), tl.label) {
				return tl.bt
			}
		}
	}
	return task.BusinessFeature
}
