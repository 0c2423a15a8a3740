// Package conventions makes and reads the names mozi gives things in git:
// the branch a task's work goes on, "<kind>/<issue>-<brief>" (fix/3-empty-
// config, feat/12-token-bucket; "<kind>/<brief>" for work on the
// repository itself). Prompts tell agents the name made here, the webhook's
// rules read the issue of a pull request's head branch back with the
// parser here, so the two cannot drift apart.
//
// Every parser takes untrusted text and must not panic on any input.
package conventions

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// Branch is a branch name of the convention.
type Branch struct {
	// Kind is the prefix: the kind of work (fix, feat, impl, docs,
	// refactor, test); parsed names may have a longer one (user/impl).
	Kind string
	// Issue is the issue the work is for (0: the repository itself).
	Issue int
	// Brief is a few lowercase words from the issue's title, dash-joined
	// ("" only in names made by hand).
	Brief string
}

// String is the branch's name: "<kind>/<issue>-<brief>", "<kind>/<issue>"
// without a brief, "<kind>/<brief>" without an issue.
func (b Branch) String() string {
	switch {
	case b.Issue <= 0:
		return b.Kind + "/" + b.Brief
	case b.Brief == "":
		return b.Kind + "/" + strconv.Itoa(b.Issue)
	}
	return b.Kind + "/" + strconv.Itoa(b.Issue) + "-" + b.Brief
}

// Kind is the kind of work of a task, its branch's prefix: by business
// type for an issue's work, "fix" for a repository's broken deployment or
// infrastructure.
func Kind(action task.ActionType, business task.BusinessType) string {
	if action.RepositoryLevel() {
		return "fix"
	}
	switch business {
	case task.BusinessBug, task.BusinessInfrastructure:
		return "fix"
	case task.BusinessImpl:
		return "impl"
	case task.BusinessDocs:
		return "docs"
	case task.BusinessRefactor:
		return "refactor"
	case task.BusinessTest:
		return "test"
	}
	return "feat"
}

var briefRE = regexp.MustCompile(`[a-z0-9]+`)

// Brief makes the <brief> of a branch name from an issue title: a few
// lowercase ASCII words joined by dashes ("Fix crash on empty config" →
// "fix-crash-on-empty-config"), "work" when the title has none.
func Brief(title string) string {
	// Drop the [repo][sub][parent #N] prefix of sub-issues.
	if i := strings.LastIndex(title, "]"); i >= 0 && strings.HasPrefix(strings.TrimSpace(title), "[") {
		title = title[i+1:]
	}
	words := briefRE.FindAllString(strings.ToLower(title), -1)
	var out []string
	n := 0
	for _, w := range words {
		if n+len(w) > 32 || len(out) == 5 {
			break
		}
		out = append(out, w)
		n += len(w) + 1
	}
	if len(out) == 0 {
		return "work"
	}
	return strings.Join(out, "-")
}

// TaskBranch is the branch task t's work belongs on: the pull request's
// head for work on a pull request; the branch its earlier run went on for
// work that opens one (the title may have changed since); else a new one
// for its issue (the linked issue of a pull request's task) with brief.
func TaskBranch(t task.Task, brief string) string {
	m := t.Meta
	if m.HeadBranch != "" && t.ActionType != task.ActionIssueAssigned {
		return m.HeadBranch
	}
	if m.WorkBranch != "" && t.ActionType.OpensPullRequest() {
		return m.WorkBranch
	}
	n := t.IssueNumber
	if m.LinkedIssue > 0 {
		n = m.LinkedIssue
	}
	return Branch{Kind: Kind(t.ActionType, t.BusinessType), Issue: n, Brief: brief}.String()
}

// maxIssue bounds issue numbers read from names (Gitea uses int64, mozi
// int32 columns).
const maxIssue = 1<<31 - 1

// fix/3-empty-config, feat/2-token-bucket, user/impl/7-x, docs/8
var branchRE = regexp.MustCompile(`(?s)^((?:[\w.-]+/)*[\w.-]+)/(\d+)(?:-(.*))?$`)

// ParseBranch reads a branch name of the convention that names an issue
// ("refs/heads/" allowed). Names without an issue number ("fix/work"), or
// with one out of range, are not read: they name no issue.
func ParseBranch(name string) (Branch, bool) {
	m := branchRE.FindStringSubmatch(strings.TrimPrefix(name, "refs/heads/"))
	if m == nil {
		return Branch{}, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n <= 0 || n > maxIssue {
		return Branch{}, false
	}
	return Branch{Kind: m[1], Issue: n, Brief: m[3]}, true
}

// BranchIssue is the issue a branch name of the convention names (0:
// none).
func BranchIssue(name string) int {
	b, _ := ParseBranch(name)
	return b.Issue
}

// Valid reports whether name is a branch name git accepts that cannot be
// read as an option or a path outside refs/heads: what a run may check out
// or push, whoever named it (a pull request's head comes from Gitea).
func Valid(name string) bool {
	if name == "" || name == "@" || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") ||
		strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "//") || strings.Contains(name, "@{") {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}
