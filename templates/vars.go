package templates

import (
	"regexp"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// Vars are the values mozi fills placeholders with.
type Vars map[string]string

// commonVars are known to every text.
var commonVars = []string{
	"repo", "repo_name", "issue_number", "title", "brief", "agent", "author", "gitea_url",
	"gitea_api", "workdir", "token_env", "branch", "lead", "report_issue",
}

// actionVars are the extra placeholders each action's texts may use.
var actionVars = map[task.ActionType][]string{
	task.ActionCIFailure:             {"pr_number", "head_sha", "head_branch", "status_context", "target_url"},
	task.ActionReviewResult:          {"pr_number", "head_branch", "reviewer", "review_state"},
	task.ActionReviewComment:         {"pr_number", "head_branch", "reviewer", "review_state"},
	task.ActionReviewRequest:         {"pr_number", "head_branch"},
	task.ActionReviewUpdated:         {"pr_number", "head_branch"},
	task.ActionMention:               {"mentioned_by"},
	task.ActionDeployFailure:         {"head_sha", "status_context", "target_url"},
	task.ActionInfrastructureFailure: {"head_sha", "status_context", "target_url"},
	task.ActionIssueClosed:           {"closed_by"},
	task.ActionReviewMerged:          {"pr_number", "head_branch", "merged_by"},
	task.ActionRoundReview:           {"round"},
}

// sectionVars are the extra placeholders of sections and labels.
var sectionVars = map[string][]string{
	"section.role_skill":        {"role_guidance"},
	"section.toolchain_context": {"hint", "subject", "issue_text"},
	"section.retry":             {"attempt", "previous_error"},
	"section.git_operation":     {"base"},
	"section.git_detached":      {"checkout"},
	"section.gitea_api_pull":    {"base"},
	"section.follow_up":         {"missing"},
	"label.review":              {"reviewer", "review_state"},
	"label.subject_pull":        {"pr_number"},
	"label.prior_issue":         {"number", "state"},
	"label.cut":                 {"bytes"},
	"label.round_one_review":    {"who", "state"},
	"label.round_comment":       {"who"},
	"label.repair_round":        {"round", "rounds"},
	"label.job_log_unreadable":  {"reason"},
	"label.answer":              {"person"},
}

// SectionNames and LabelNames are every section and label a set defines.
var (
	SectionNames = []string{"iron_rules", "role", "role_skill", "toolchain_context", "prior_context",
		"git_operation", "git_detached", "git_self", "gitea_api", "gitea_api_pull", "gitea_unconfigured",
		"constraints", "gitea_convention", "wiki_guide", "delivery_checklist", "delivery_report",
		"notification", "skills", "retry", "follow_up", "discussion", "round_review", "round_answer"}
	LabelNames = []string{"steps", "review", "comment", "check", "no_body", "subject_issue",
		"subject_pull", "subject_repo", "prior_issue", "latest_report", "no_report", "sub_issues", "cut",
		"note_uncommitted", "note_diverged", "missing_pull_request", "missing_pull_closed",
		"missing_report", "missing_push", "missing_review", "round", "round_one_review", "round_loose", "round_comment",
		"repair_round", "job_log_tail", "job_log_unreadable", "answer", "asked", "answered", "question_field"}
)

// ActionVars lists the placeholders an action's texts may use.
func ActionVars(a task.ActionType) []string {
	return append(append([]string{}, commonVars...), actionVars[a]...)
}

func allowed(extra ...[]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range commonVars {
		out[v] = true
	}
	for _, list := range extra {
		for _, v := range list {
			out[v] = true
		}
	}
	return out
}

var placeholderRE = regexp.MustCompile(`\{\{|\}\}|\{([a-z][a-z0-9_]*)\}`)

// Placeholders lists the {name}s in text ({{ and }} are literal braces).
func Placeholders(text string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(text, -1) {
		if m[1] != "" {
			out = append(out, m[1])
		}
	}
	return out
}

// Render fills text's placeholders from vars. A known placeholder without a
// value renders as "?", so no brace survives into a prompt.
func Render(text string, vars Vars) string {
	if !strings.ContainsAny(text, "{}") {
		return text
	}
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		switch m {
		case "{{":
			return "{"
		case "}}":
			return "}"
		}
		if v, ok := vars[m[1:len(m)-1]]; ok && v != "" {
			return v
		}
		return "?"
	})
}
