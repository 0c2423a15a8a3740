package prompts

import (
	"fmt"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// textSection renders one of the template set's section texts as it is.
type textSection struct {
	name     string
	layer    Layer
	priority int
	budget   int
}

func (s textSection) Name() string  { return s.name }
func (s textSection) Layer() Layer  { return s.layer }
func (s textSection) Priority() int { return s.priority }
func (s textSection) Budget() int   { return s.budget }
func (s textSection) Render(r *Renderer, budget int) string {
	return r.Cut(r.Section(s.name), budget)
}

// roleSection is L1: who the agent is, and its own role files.
type roleSection struct{ textSection }

func (s roleSection) Render(r *Renderer, budget int) string {
	head := r.Section("role")
	if strings.TrimSpace(r.In.Agent.Role) == "" {
		return r.Cut(head, budget)
	}
	return head + "\n\n" + r.Cut(strings.TrimSpace(r.In.Agent.Role), budget-len(head)-2)
}

// gitSection (L2, 35) says where the agent works: a worktree on its
// branch, a read-only detached checkout, or (workspace: none) its own
// directory where it makes the branch itself.
type gitSection struct{ textSection }

func (s gitSection) Render(r *Renderer, budget int) string {
	c := r.In.Checkout
	var text string
	switch {
	case c == nil:
		text = r.Section("git_self")
	case c.Branch == "":
		text = r.Section("git_detached")
	default:
		text = r.Section("git_operation")
	}
	if c != nil && c.Note != "" {
		text += "\n\n" + r.Label("note_"+c.Note)
	}
	return r.Cut(text, budget)
}

// giteaAPISection (L2, 40) is how to talk to Gitea: comments, sub-issues
// and reads for every task, opening a pull request only for the tasks
// whose work is one (a round review or a discussion must not close the
// parent issue with a pull request); and no API at all without a Gitea.
type giteaAPISection struct{ textSection }

func (s giteaAPISection) Render(r *Renderer, budget int) string {
	if r.In.GiteaURL == "" {
		return r.Cut(r.Section("gitea_unconfigured"), budget)
	}
	text := r.Section("gitea_api")
	if r.In.Task.ActionType.OpensPullRequest() {
		text += "\n\n" + r.Section("gitea_api_pull")
	}
	return r.Cut(text, budget)
}

// wikiSection (L2, 60) points to the team's knowledge; without a Gitea
// there is no wiki to link.
type wikiSection struct{ textSection }

func (s wikiSection) Render(r *Renderer, budget int) string {
	if r.In.GiteaURL == "" {
		return ""
	}
	return s.textSection.Render(r, budget)
}

// roleSkillSection (L2, 30) says how to act in the role this action puts
// the agent in.
type roleSkillSection struct{ textSection }

func (s roleSkillSection) Render(r *Renderer, budget int) string {
	tpl, err := r.Set.Resolve(r.In.Task.ActionType, r.In.Task.BusinessType)
	if err != nil || strings.TrimSpace(tpl.Role) == "" {
		return ""
	}
	return r.Cut(r.Section("role_skill", "role_guidance", r.Text(tpl.Role)), budget)
}

// toolchainSection (L2, 10) is the task itself: the action hint, the issue
// and what happened, the retry context, and the steps. The issue text gets
// what the budget leaves.
type toolchainSection struct{ textSection }

const issueSlot = "\x00issue\x00"

func (s toolchainSection) Render(r *Renderer, budget int) string {
	t := r.In.Task
	tpl, err := r.Set.Resolve(t.ActionType, t.BusinessType)
	if err != nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(r.Section("toolchain_context", "hint", r.Text(tpl.Hint), "subject", s.subject(r),
		"issue_text", issueSlot))
	for _, block := range s.details(r) {
		b.WriteString("\n\n")
		b.WriteString(block)
	}
	fmt.Fprintf(&b, "\n\n## %s\n", r.Label("steps"))
	for i, step := range tpl.Steps {
		fmt.Fprintf(&b, "%d. %s\n", i+1, r.Text(step))
	}
	fixed := strings.TrimRight(b.String(), "\n")
	body := strings.TrimSpace(r.In.Issue.Body)
	if body == "" {
		body = strings.TrimSpace(t.IssueBodyCache)
	}
	if body == "" {
		body = r.Label("no_body")
	}
	room := budget - (len(fixed) - len(issueSlot))
	return r.Cut(strings.Replace(fixed, issueSlot, r.Cut(body, room), 1), budget)
}

func (s toolchainSection) subject(r *Renderer) string {
	t := r.In.Task
	switch {
	case t.IssueNumber == 0:
		return r.Label("subject_repo")
	case t.PRNumber == t.IssueNumber && t.PRNumber > 0:
		return r.Label("subject_pull")
	}
	return r.Label("subject_issue")
}

// details are the event's own texts: the review, the comment, the failed
// check, the retry, the discussion rules, the round's sub-issues.
func (s toolchainSection) details(r *Renderer) []string {
	t, m := r.In.Task, r.In.Task.Meta
	var out []string
	switch t.ActionType {
	case task.ActionReviewResult, task.ActionReviewComment:
		if strings.TrimSpace(m.ReviewBody) != "" {
			out = append(out, "## "+r.Label("review")+"\n"+r.Cut(quote(m.ReviewBody), 8<<10))
		}
		if block := roundBlock(r, r.In.Round); block != "" {
			out = append(out, block)
		}
	case task.ActionMention:
		if strings.TrimSpace(m.CommentBody) != "" {
			out = append(out, "## "+r.Label("comment")+"\n"+r.Cut(quote(m.CommentBody), 8<<10))
		}
	case task.ActionCIFailure, task.ActionDeployFailure, task.ActionInfrastructureFailure:
		out = append(out, fmt.Sprintf("## %s\n- context: %s\n- state: %s\n- commit: %s\n- log: %s",
			r.Label("check"), m.StatusCtx, m.StatusState, m.HeadSHA, m.TargetURL))
	case task.ActionDiscussion:
		out = append(out, r.Section("discussion"))
	case task.ActionRoundReview:
		var b strings.Builder
		fmt.Fprintf(&b, "## %s\n", r.Label("sub_issues"))
		per := (8 << 10) / max(1, len(r.In.SubIssues))
		for _, sub := range r.In.SubIssues {
			fmt.Fprintf(&b, "### %s\n%s\n", r.Label("prior_issue", "number", fmt.Sprint(sub.Number),
				"title", sub.Title, "state", sub.State), r.Cut(reportOr(r, sub.Report), per))
		}
		out = append(out, strings.TrimRight(b.String(), "\n"), r.Section("round_review"))
	}
	out = append(out, waitDetails(r)...)
	if m.FollowUp != "" {
		out = append(out, r.Section("follow_up", "missing", r.Label("missing_"+m.FollowUp)))
	}
	if rt := r.In.Retry; rt != nil {
		block := r.Section("retry", "attempt", fmt.Sprint(rt.Attempt), "previous_error", oneLine(rt.Error))
		if tail := strings.TrimSpace(rt.OutputTail); tail != "" {
			block += "\n```\n" + r.Cut(lastBytes(tail, 4<<10), 4<<10) + "\n```"
		}
		out = append(out, block)
	}
	return out
}

// priorSection (L2, 20) shows the issues this one builds on, each with its
// latest [Action Report].
type priorSection struct{ textSection }

func (s priorSection) Render(r *Renderer, budget int) string {
	if len(r.In.Prior) == 0 {
		return ""
	}
	head := r.Section("prior_context")
	per := (budget - len(head)) / len(r.In.Prior)
	var b strings.Builder
	b.WriteString(head)
	for _, p := range r.In.Prior {
		title := r.Label("prior_issue", "number", fmt.Sprint(p.Number), "title", p.Title, "state", p.State)
		item := fmt.Sprintf("\n\n## %s (%s)\n%s", title, p.Relation, reportOr(r, p.Report))
		b.WriteString(r.Cut(item, per))
	}
	return r.Cut(b.String(), budget)
}

func reportOr(r *Renderer, report string) string {
	if strings.TrimSpace(report) == "" {
		return r.Label("no_report")
	}
	return r.Label("latest_report") + "\n" + quote(report)
}

// deliverySection (L2, 65) is the checklist, ending with the [Action
// Report] the agent must post, filled with what mozi knows.
type deliverySection struct{ textSection }

func (s deliverySection) Render(r *Renderer, budget int) string {
	t := r.In.Task
	tpl, err := r.Set.Resolve(t.ActionType, t.BusinessType)
	if err != nil || t.ActionType.Notification() || strings.TrimSpace(tpl.OutputTemplate) == "" {
		return r.Cut(r.Section("notification"), budget)
	}
	checklist := "delivery_checklist"
	if !t.ActionType.PushesCode() {
		checklist = "delivery_report"
	}
	// How to ask a person comes before the report's format, which ends
	// the section.
	out := r.Section(checklist) + "\n" + r.Label("question_field") + "\n\n```\n" +
		strings.TrimRight(r.Text(tpl.OutputTemplate), "\n") + "\n```"
	return r.Cut(out, budget)
}

// skillsSection (L3) lists the agent's skills.
type skillsSection struct{ textSection }

func (s skillsSection) Render(r *Renderer, budget int) string {
	if len(r.In.Agent.Skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(r.Section("skills"))
	b.WriteString("\n")
	for _, skill := range r.In.Agent.Skills {
		fmt.Fprintf(&b, "- %s\n", skill)
	}
	return r.Cut(strings.TrimRight(b.String(), "\n"), budget)
}

// quote makes someone else's text a Markdown quote, so it reads as data.
func quote(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 500 {
		s = cutRunes(s, 500) + "…"
	}
	if s == "" {
		return "?"
	}
	return s
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && (s[i]&0xC0) == 0x80 {
		i++
	}
	return s[i:]
}
