package conventions

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestParentIssue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		title, body string
		want        int
	}{
		{"[widget][sub][parent #1] Token bucket middleware", "", 1},
		{"[widget][SUB] [Parent #12] x", "", 12},
		{"plain title", "Parent: #7\nDepends: #1", 7},
		{"plain title", "## Task\n- parent: #9", 9},
		{"plain title", "the parent: #9 is mentioned mid-line", 0},
		{"[widget][sub] no parent", "", 0},
		{"[sub][parent #99999999999999999999]", "", 0},
		{"", "", 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ParentIssue(tt.title, tt.body), "%q / %q", tt.title, tt.body)
	}
}

func TestDependsOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want []int
	}{
		{"Parent: #1\nDepends: #1\n\n## Task", []int{1}},
		{"Depends: #2\nParent: #1", []int{2}},
		{"Depends on: #3, #4\ndepends: #3", []int{3, 4}},
		{"- Depends: #5 (data first)", []int{5}},
		{"This depends: on nothing", nil},
		{"No deps here #6", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, DependsOn(tt.body), tt.body)
	}
}

func TestClosingRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		title, body, branch string
		want                []IssueRef
	}{
		{"closes in body", "[moz] fix: crash", "Root cause: nil map.\n\nCloses #3", "fix/3-empty-config",
			[]IssueRef{{"acme/widget", 3}}},
		{"branch fallback", "Token bucket", "Implements the bucket.", "feat/2-token-bucket",
			[]IssueRef{{"acme/widget", 2}}},
		{"case-insensitive keywords, several refs", "FIXES #1", "resolves #2, #4\nfixed: #2", "",
			[]IssueRef{{"acme/widget", 1}, {"acme/widget", 2}, {"acme/widget", 4}}},
		{"other repository", "", "Closes acme/infra#8", "fix/3-x",
			[]IssueRef{{"acme/infra", 8}}},
		{"keyword must be a word", "", "encloses #3 and prefixes #4", "main", nil},
		{"no link at all", "", "", "main", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ClosingRefs("acme/widget", tt.title, tt.body, tt.branch))
		})
	}
}

func TestMentions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"recorded comment", "Looks like infra: @infra1 can you check the runner? cc @nobody-here and @coder2",
			[]string{"infra1", "nobody-here", "coder2"}},
		{"repeats and case", "@Coder1 @coder1, @coder1.", []string{"Coder1"}},
		{"email is not a mention", "mail lead@example.com", nil},
		{"inline code", "run `@coder1 build` then ask @coder2", []string{"coder2"}},
		{"fenced code", "```\n@coder1\n```\n~~~\n@coder3\n~~~\n@coder2", []string{"coder2"}},
		{"quoted line", "> @coder1 please fix\nthanks @coder2", []string{"coder2"}},
		{"one-line triple-backtick span is no fence", "```make test``` fails\n@coder2 please look\n@coder3 too",
			[]string{"coder2", "coder3"}},
		{"fence with an info string", "```go\n@coder1\n```\n@coder2", []string{"coder2"}},
		{"double-backtick span", "``@coder1 `x` `` and @coder2", []string{"coder2"}},
		{"trailing punctuation", "ping @lead.", []string{"lead"}},
		{"line start and brackets", "@a (@b) [@c]", []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Mentions(tt.body))
		})
	}
}

func TestActionReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		match  ReportMatch
		fields map[string]string
	}{
		{"recorded report", "[Action Report]\n\n**Root cause**: nil map\n**Fix**: init map\n**CI**: pending",
			ReportAtStart, map[string]string{"Root cause": "nil map", "Fix": "init map", "CI": "pending"}},
		{"leading space, lower case", "  \n[action report]\n**PR**: #4", ReportAtStart, map[string]string{"PR": "#4"}},
		{"somewhere", "Done.\n[ACTION REPORT]\n**Branch:** fix/3-x", ReportSomewhere,
			map[string]string{"Branch": "fix/3-x"}},
		{"full-width colon", "[Action Report]\n**根因**：nil map\n**分支**：fix/3-x",
			ReportAtStart, map[string]string{"根因": "nil map", "分支": "fix/3-x"}},
		{"empty value kept", "[Action Report]\n**CI**:\n- **Files**: a.go", ReportAtStart,
			map[string]string{"CI": "", "Files": "a.go"}},
		{"not a report", "Just chatting about **bold**: things", NoReport, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			match, fields := ActionReport(tt.body)
			assert.Equal(t, tt.match, match)
			assert.Equal(t, tt.fields, fields)
		})
	}
}

func FuzzConventions(f *testing.F) {
	for _, s := range []string{
		"[widget][sub][parent #1] x", "Parent: #1\nDepends: #1, #2", "Closes acme/widget#3",
		"```\n@a\n", "[Action Report]\n**a**: b", "@x @y.", "fix/3-a", "**：**", "#", "@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = ParentIssue(s, s)
		for _, n := range DependsOn(s) {
			if n <= 0 {
				t.Fatalf("DependsOn returned %d", n)
			}
		}
		_ = ClosingRefs("o/r", s, s, s)
		for _, m := range Mentions(s) {
			if m == "" || !utf8.ValidString(m) && utf8.ValidString(s) {
				t.Fatalf("bad mention %q", m)
			}
		}
		_, _ = ActionReport(s)
		_, _ = ParseIssueRef(s)
	})
}
