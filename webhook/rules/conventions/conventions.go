// Package conventions reads the plain-text conventions agents and humans use
// in Gitea: sub-issue titles and Parent:/Depends: lines, Closes #N links,
// branch names (read by repository/task/conventions, which makes them),
// @mentions and [Action Report] comments. Every function here
// takes untrusted text and must not panic on any input.
package conventions

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	branchname "github.com/moziplus/mozi/repository/task/conventions"
)

var (
	// [widget][sub][parent #1] Token bucket
	subTitleRE = regexp.MustCompile(`(?i)\[sub\]\s*\[parent\s*#(\d+)\]`)
	parentRE   = regexp.MustCompile(`(?im)^[ \t]*(?:[-*][ \t]*)?parent[ \t]*:[ \t]*#(\d+)`)
	dependsRE  = regexp.MustCompile(`(?im)^[ \t]*(?:[-*][ \t]*)?depends(?:[ \t]+on)?[ \t]*:[ \t]*(.*)$`)
	issueRefRE = regexp.MustCompile(`#(\d+)`)
	// Closes #3, fixes: #4, Resolves acme/widget#5 (GitHub/Gitea closing keywords).
	closesRE = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+((?:[\w.-]+/[\w.-]+)?#\d+(?:[ \t]*,[ \t]*(?:[\w.-]+/[\w.-]+)?#\d+)*)`)
	refRE    = regexp.MustCompile(`(?:([\w.-]+/[\w.-]+))?#(\d+)`)
)

// maxNumber bounds issue numbers parsed from text (Gitea uses int64, mozi
// int32 columns).
const maxNumber = 1<<31 - 1

func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > maxNumber {
		return 0, false
	}
	return n, true
}

// ParentIssue finds the parent of a sub-issue: the title convention
// "[repo][sub][parent #N] …" first, then a "Parent: #N" line in the body.
func ParentIssue(title, body string) int {
	if m := subTitleRE.FindStringSubmatch(title); m != nil {
		if n, ok := atoi(m[1]); ok {
			return n
		}
	}
	if m := parentRE.FindStringSubmatch(body); m != nil {
		if n, ok := atoi(m[1]); ok {
			return n
		}
	}
	return 0
}

// DependsOn lists the issues named on "Depends: #N[, #M]" lines, in order,
// without repeats.
func DependsOn(body string) []int {
	var out []int
	for _, m := range dependsRE.FindAllStringSubmatch(body, -1) {
		for _, ref := range issueRefRE.FindAllStringSubmatch(m[1], -1) {
			if n, ok := atoi(ref[1]); ok && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// IssueRef names an issue, possibly in another repository.
type IssueRef struct {
	Repo   string // owner/name
	Number int
}

func (r IssueRef) String() string { return r.Repo + "#" + strconv.Itoa(r.Number) }

// ParseIssueRef reads "owner/name#N".
func ParseIssueRef(s string) (IssueRef, bool) {
	repo, num, ok := strings.Cut(s, "#")
	if !ok || !strings.Contains(repo, "/") {
		return IssueRef{}, false
	}
	n, ok := atoi(num)
	return IssueRef{Repo: repo, Number: n}, ok
}

// ClosingRefs lists the issues a pull request closes: "Closes/Fixes/Resolves
// #N" (any case, also owner/name#N) in its title or body; repo is the pull
// request's own repository. Without any, the branch name convention
// "<kind>/<N>-<brief>" names the issue.
func ClosingRefs(repo, title, body, branch string) []IssueRef {
	var out []IssueRef
	add := func(r IssueRef) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, text := range []string{title, body} {
		for _, m := range closesRE.FindAllStringSubmatch(text, -1) {
			for _, ref := range refRE.FindAllStringSubmatch(m[1], -1) {
				n, ok := atoi(ref[2])
				if !ok {
					continue
				}
				target := repo
				if ref[1] != "" {
					target = ref[1]
				}
				add(IssueRef{Repo: target, Number: n})
			}
		}
	}
	if len(out) == 0 {
		if n := branchname.BranchIssue(branch); n > 0 {
			add(IssueRef{Repo: repo, Number: n})
		}
	}
	return out
}

var mentionRE = regexp.MustCompile(`(?:^|[^\w.@/-])@([A-Za-z0-9][A-Za-z0-9_.-]*)`)

// Mentions lists the @logins in a comment, in order and without repeats,
// ignoring those inside fenced or inline code and on quoted ("> ") lines:
// quoting someone's request must not spawn the agent again. Trailing dots
// are punctuation, not part of the login.
func Mentions(body string) []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(stripCode(body), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ">") {
			continue
		}
		for _, m := range mentionRE.FindAllStringSubmatch(line, -1) {
			login := strings.TrimRight(m[1], ".-")
			key := strings.ToLower(login)
			if login != "" && !seen[key] {
				seen[key] = true
				out = append(out, login)
			}
		}
	}
	return out
}

var inlineCodeRE = regexp.MustCompile("`+[^`\n]*`+")

// opensFence reports whether a line opens a fenced code block with marker.
// A backtick fence's info string cannot hold a backtick (CommonMark), so
// "```code```" on one line is an inline span, not a fence that would hide
// every later line.
func opensFence(trimmed, marker string) bool {
	if !strings.HasPrefix(trimmed, marker) {
		return false
	}
	rest := strings.TrimLeft(trimmed, marker[:1])
	return marker != "```" || !strings.Contains(rest, "`")
}

// stripCode blanks fenced code blocks (``` or ~~~) and inline code spans.
func stripCode(body string) string {
	lines := strings.Split(body, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		case opensFence(trimmed, "```"):
			fence, lines[i] = "```", ""
		case opensFence(trimmed, "~~~"):
			fence, lines[i] = "~~~", ""
		default:
			lines[i] = inlineCodeRE.ReplaceAllString(line, "")
		}
	}
	return strings.Join(lines, "\n")
}

// ReportMatch says how a comment carries the [Action Report] marker.
type ReportMatch int

// Report matches: none, the marker somewhere in the body (accepted as a
// fallback), or the body starting with it (the convention).
const (
	NoReport ReportMatch = iota
	ReportSomewhere
	ReportAtStart
)

const reportMarker = "[action report]"

// ActionReport reports whether body is an [Action Report] (case-insensitive,
// leading white space allowed; anywhere in the body is accepted as a
// fallback) and parses its "**Field**: value" lines.
func ActionReport(body string) (ReportMatch, map[string]string) {
	lower := strings.ToLower(body)
	var match ReportMatch
	switch {
	case strings.HasPrefix(strings.TrimSpace(lower), reportMarker):
		match = ReportAtStart
	case strings.Contains(lower, reportMarker):
		match = ReportSomewhere
	default:
		return NoReport, nil
	}
	return match, ReportFields(body)
}

// **Root cause**: nil map   |   **根因**：nil map   |   **CI:** passed
var fieldRE = regexp.MustCompile(`^\s*(?:[-*]\s+)?\*\*([^*\n]+?)\s*(?:[:：]\s*)?\*\*\s*(?:[:：]\s*)?(.*)$`)

// ReportFields parses "**Field**: value" lines (ASCII or full-width colon,
// the colon inside or outside the bold). A field without a value is kept
// with an empty value.
func ReportFields(body string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		m := fieldRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := strings.TrimSpace(m[1])
		if name == "" {
			continue
		}
		if _, dup := fields[name]; !dup {
			fields[name] = strings.TrimSpace(m[2])
		}
	}
	return fields
}
