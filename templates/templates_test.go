package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
)

func TestDefaultSetsLoad(t *testing.T) {
	t.Parallel()
	for _, locale := range Locales {
		s, err := Load(locale, "")
		require.NoError(t, err, locale)
		for _, a := range task.ActionTypes {
			tpl, err := s.Resolve(a, task.BusinessBug)
			require.NoError(t, err)
			assert.NotEmpty(t, tpl.Hint, "%s %s", locale, a)
			assert.NotEmpty(t, tpl.Steps, "%s %s", locale, a)
		}
	}
}

func TestBusinessTypesDifferInStepsAndReport(t *testing.T) {
	t.Parallel()
	s, err := Load("en", "")
	require.NoError(t, err)
	seen := map[string]task.BusinessType{}
	for _, b := range task.BusinessTypes {
		tpl, err := s.Resolve(task.ActionIssueAssigned, b)
		require.NoError(t, err)
		key := tpl.Hint + strings.Join(tpl.Steps, "|") + tpl.OutputTemplate
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share a template", b, other)
		}
		seen[key] = b
	}
	bug, _ := s.Resolve(task.ActionIssueAssigned, task.BusinessBug)
	assert.Contains(t, bug.Hint, "root cause")
	assert.Equal(t, []string{"Root cause", "Fix", "Branch", "PR", "CI"},
		s.ReportFields(task.ActionIssueAssigned, task.BusinessBug))
	zh, err := Load("zh", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"根因", "修复方式", "分支", "PR", "CI"},
		zh.ReportFields(task.ActionIssueAssigned, task.BusinessBug))
	assert.Empty(t, s.ReportFields(task.ActionIssueClosed, ""), "a notification asks for no report")
}

func writeOverride(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "override.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func TestOverrideMergesOverTheDefault(t *testing.T) {
	t.Parallel()
	path := writeOverride(t, `
actions:
  ci_failure:
    steps:
      - "Open {target_url}"
      - "Fix it on {head_branch}"
  issue_assigned:
    business:
      docs:
        hint: "Write the docs for {repo}#{issue_number}."
sections:
  wiki_guide: |
    # Knowledge
    Our handbook: https://handbook.example/{repo_name}
`)
	s, err := Load("en", path)
	require.NoError(t, err)
	ci, _ := s.Resolve(task.ActionCIFailure, "")
	assert.Equal(t, []string{"Open {target_url}", "Fix it on {head_branch}"}, ci.Steps)
	assert.Contains(t, ci.Hint, "CI failed", "what the override leaves out stays")
	docs, _ := s.Resolve(task.ActionIssueAssigned, task.BusinessDocs)
	assert.Equal(t, "Write the docs for {repo}#{issue_number}.", docs.Hint)
	assert.NotEmpty(t, docs.Steps)
	assert.Contains(t, s.Section("wiki_guide"), "handbook")
}

func TestBrokenOverridesNameFileLineAndKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{"unknown placeholder", "actions:\n  mention:\n    hint: \"Hi {agnet}\"\n",
			`override.yaml:3: actions.mention.hint: unknown placeholder {agnet}`},
		{"placeholder of another action", "actions:\n  mention:\n    steps:\n      - \"see {target_url}\"\n",
			`override.yaml:4: actions.mention.steps[0]: unknown placeholder {target_url}`},
		{"empty output template", "actions:\n  ci_failure:\n    output_template: \"\"\n",
			`override.yaml:3: actions.ci_failure.output_template: is empty`},
		{"report without marker", "actions:\n  ci_failure:\n    output_template: \"**Cause**: x\"\n",
			`override.yaml:3: actions.ci_failure.output_template: must start with [Action Report]`},
		{"unknown action", "actions:\n  deploy:\n    hint: x\n",
			`override.yaml:2: actions.deploy: unknown action type "deploy"`},
		{"unknown business type", "actions:\n  issue_assigned:\n    business:\n      chore:\n        hint: x\n",
			`override.yaml:4: actions.issue_assigned.business.chore: unknown business type "chore"`},
		{"unknown key", "actions:\n  mention:\n    hnt: x\n",
			`override.yaml:3: unknown field "hnt" in actions.mention (did you mean "hint"?)`},
		{"unknown section", "sections:\n  footer: x\n",
			`override.yaml:2: sections.footer: unknown section`},
		{"other locale", "locale: zh\n", `override.yaml:1: locale: the file is for locale "zh" but the set is "en"`},
		{"syntax", "actions: [\n", `override.yaml:1: did not find expected node content`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load("en", writeOverride(t, tt.body))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	vars := Vars{"repo": "acme/widget", "issue_number": "3"}
	assert.Equal(t, "acme/widget#3", Render("{repo}#{issue_number}", vars))
	assert.Equal(t, `{"body": "x"} #?`, Render(`{{"body": "x"}} #{pr_number}`, vars), "literal braces; a missing value is visible")
	assert.Equal(t, []string{"repo", "issue_number"}, Placeholders("{repo} {{literal}} #{issue_number}"))
}
