package conventions

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/moziplus/mozi/repository/task"
)

func TestBranchRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		b    Branch
		name string
	}{
		{Branch{Kind: "feat", Issue: 7, Brief: "token-bucket-middleware"}, "feat/7-token-bucket-middleware"},
		{Branch{Kind: "fix", Issue: 3, Brief: "empty-config"}, "fix/3-empty-config"},
		{Branch{Kind: "docs", Issue: 8}, "docs/8"},
		{Branch{Kind: "impl", Issue: 12, Brief: "404-page"}, "impl/12-404-page"},
		{Branch{Kind: "user/impl", Issue: 7, Brief: "x"}, "user/impl/7-x"},
		{Branch{Kind: "test", Issue: maxIssue, Brief: "work"}, "test/2147483647-work"},
		{Branch{Kind: "fix.v2", Issue: 1, Brief: "a-1-b"}, "fix.v2/1-a-1-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.name, tc.b.String())
			got, ok := ParseBranch(tc.b.String())
			assert.True(t, ok)
			assert.Equal(t, tc.b, got, "parse(make(x)) == x")
			got, ok = ParseBranch("refs/heads/" + tc.name)
			assert.True(t, ok)
			assert.Equal(t, tc.b, got, "a full ref reads the same")
			assert.Equal(t, tc.b.Issue, BranchIssue(tc.name))
		})
	}
}

func TestParseBranchMalformed(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"", "main", "fix", "fix/", "/3-x", "3-x", "fix/empty-3", "fix/3x-y", "fix/0-zero", "fix/-3-neg",
		"fix/99999999999999999999-large", "fix/2147483648-over-int32", "fix/３-fullwidth", "fix /3-space",
		"refs/heads/", "refs/tags/v1", "fix/work", // a repository's work names no issue
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, ok := ParseBranch(name)
			assert.False(t, ok)
			assert.Zero(t, b)
			assert.Zero(t, BranchIssue(name))
		})
	}
}

func TestParseBranchReadsTheLastIssue(t *testing.T) {
	t.Parallel()
	// Kind takes what it can: the issue is the last "/N-" or "/N" segment.
	b, ok := ParseBranch("a/1-b/2-c")
	assert.True(t, ok)
	assert.Equal(t, Branch{Kind: "a/1-b", Issue: 2, Brief: "c"}, b)
	// A brief may hold anything git allows after the dash.
	b, ok = ParseBranch("feat/5-x/y")
	assert.True(t, ok)
	assert.Equal(t, Branch{Kind: "feat", Issue: 5, Brief: "x/y"}, b)
}

func TestRepositoryBranchIsNotAnIssue(t *testing.T) {
	t.Parallel()
	// Without an issue, a name is made but names no issue when read back,
	// unless its brief starts with a number: then it reads as that issue,
	// as it always did (a title "404 page" on a repository's deploy
	// failure).
	assert.Equal(t, "fix/deploy-broken", Branch{Kind: "fix", Brief: "deploy-broken"}.String())
	assert.Zero(t, BranchIssue("fix/deploy-broken"))
	assert.Equal(t, 404, BranchIssue(Branch{Kind: "fix", Brief: "404-page"}.String()))
}

func TestKind(t *testing.T) {
	t.Parallel()
	tests := []struct {
		action   task.ActionType
		business task.BusinessType
		want     string
	}{
		{task.ActionIssueAssigned, task.BusinessFeature, "feat"},
		{task.ActionIssueAssigned, "", "feat"},
		{task.ActionIssueAssigned, task.BusinessBug, "fix"},
		{task.ActionIssueAssigned, task.BusinessInfrastructure, "fix"},
		{task.ActionIssueAssigned, task.BusinessImpl, "impl"},
		{task.ActionIssueAssigned, task.BusinessDocs, "docs"},
		{task.ActionIssueAssigned, task.BusinessRefactor, "refactor"},
		{task.ActionIssueAssigned, task.BusinessTest, "test"},
		{task.ActionDeployFailure, task.BusinessDocs, "fix"},
		{task.ActionInfrastructureFailure, "", "fix"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, Kind(tc.action, tc.business), "%s/%s", tc.action, tc.business)
	}
}

func TestBrief(t *testing.T) {
	t.Parallel()
	for title, want := range map[string]string{
		"Fix crash on empty config":                        "fix-crash-on-empty-config",
		"[widget][sub][parent #1] Token bucket middleware": "token-bucket-middleware",
		"实现功能 A":                                           "a",
		"修复":                                               "work",
		"":                                                 "work",
		"A very long title with many many words in it": "a-very-long-title-with",
		"Don’t break 'quotes'":                         "don-t-break-quotes",
	} {
		got := Brief(title)
		assert.Equal(t, want, got, title)
		assert.LessOrEqual(t, len(got), 32, title)
	}
}

func TestTaskBranch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		task task.Task
		want string
	}{
		{"an issue's new branch", task.Task{IssueNumber: 7, ActionType: task.ActionIssueAssigned, BusinessType: task.BusinessBug},
			"fix/7-brief"},
		{"an issue's work keeps its head branch name out", task.Task{IssueNumber: 7, ActionType: task.ActionIssueAssigned,
			Meta: task.Meta{HeadBranch: "feat/7-old"}}, "feat/7-brief"},
		{"an earlier run's branch", task.Task{IssueNumber: 7, ActionType: task.ActionIssueAssigned,
			Meta: task.Meta{WorkBranch: "feat/7-old-title"}}, "feat/7-old-title"},
		{"a pull request's head", task.Task{IssueNumber: 12, PRNumber: 12, ActionType: task.ActionCIFailure,
			Meta: task.Meta{HeadBranch: "feat/7-x", WorkBranch: "ignored"}}, "feat/7-x"},
		{"the linked issue names it", task.Task{IssueNumber: 12, ActionType: task.ActionMention,
			Meta: task.Meta{LinkedIssue: 7}}, "feat/7-brief"},
		{"the repository's own work", task.Task{ActionType: task.ActionDeployFailure}, "fix/brief"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := TaskBranch(tc.task, "brief")
			assert.Equal(t, tc.want, got)
			if b, ok := ParseBranch(got); ok && !strings.Contains(got, "old") && tc.task.Meta.HeadBranch == "" {
				assert.Equal(t, cmpIssue(tc.task), b.Issue, "the rules read the issue the prompt named")
			}
		})
	}
}

func cmpIssue(t task.Task) int {
	if t.Meta.LinkedIssue > 0 {
		return t.Meta.LinkedIssue
	}
	return t.IssueNumber
}

func FuzzParseBranch(f *testing.F) {
	for _, s := range []string{"fix/3-a", "refs/heads/feat/12-x", "a/1-b/2-c", "docs/8", "", "/", "x/9999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := ParseBranch(s)
		if !ok {
			return
		}
		if b.Issue <= 0 || b.Issue > maxIssue || b.Kind == "" {
			t.Fatalf("ParseBranch(%q) = %+v", s, b)
		}
		// What is read back makes a name that reads the same.
		again, ok := ParseBranch(b.String())
		if !ok || again.Issue != b.Issue {
			t.Fatalf("ParseBranch(%q) = %+v, but its String %q reads %+v", s, b, b.String(), again)
		}
	})
}

func TestValid(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"feat/7-token-bucket": true, "fix/3": true, "main": true, "user/impl/7-x": true, "v1.2": true,
		"": false, "@": false, "-rf": false, "--upload-pack=x": false, "/abs": false, "fix/": false,
		"a.lock": false, "a.": false, "a..b": false, "a//b": false, "a@{1}": false, "a b": false,
		"a\tb": false, "a~1": false, "a^": false, "a:b": false, "a?": false, "a*": false, "a[": false,
		"a\\b": false, "a\x7f": false, "a\nb": false,
	} {
		assert.Equal(t, want, Valid(name), "%q", name)
	}
	for _, b := range []Branch{{Kind: "feat", Issue: 7, Brief: Brief("Token bucket")}, {Kind: "fix", Brief: Brief("")}} {
		assert.True(t, Valid(b.String()), "every name made is valid: %q", b.String())
	}
}
