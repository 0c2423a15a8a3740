package notice

import (
	"fmt"
	"strings"

	"github.com/moziplus/mozi/repository/task"
)

// Question is the one comment of a task that waits for a person because
// its agent asked: it mentions the issue's author, who is the one to ask.
func Question(t task.Task, author, question string) string {
	return fmt.Sprintf("**mozi**: %s@%s needs an answer before going on with this issue (`%s` task %d):\n\n%s\n\n"+
		"The task waits. The next comment by a person here resumes it, on the same branch, with that comment as the answer.",
		mention(author), t.Agent, t.ActionType, t.ID, quote(question))
}

// CIRed is the one comment of a task whose pull request is still red after
// its last repair round: what is red, and how to go on.
func CIRed(t task.Task, pr, rounds int, red []task.CommitStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**mozi**: %sCI of pull request #%d is still red after %d repair rounds by @%s, so mozi stopped repairing it. Still red on its head:\n\n",
		mention(t.Meta.IssueAuthor), pr, rounds, t.Agent)
	for _, st := range red {
		fmt.Fprintf(&b, "- `%s`: %s", st.Context, st.State)
		if d := oneLine(st.Description); d != "" {
			fmt.Fprintf(&b, " — %s", d)
		}
		if st.TargetURL != "" {
			fmt.Fprintf(&b, " (%s)", st.TargetURL)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nThe task waits. The next comment by a person here resumes it, on the same branch, with that comment in its prompt.")
	return b.String()
}

// RedSummary is what a task still red waits for, in one line per status,
// as its Meta.Question.
func RedSummary(red []task.CommitStatus) string {
	lines := make([]string, 0, len(red))
	for _, st := range red {
		lines = append(lines, fmt.Sprintf("%s: %s %s", st.Context, st.State, oneLine(st.Description)))
	}
	return "CI is still red: " + strings.Join(lines, "; ")
}

func mention(login string) string {
	if login == "" {
		return ""
	}
	return "@" + login + ", "
}

// quote makes text a Markdown block quote.
func quote(text string) string {
	return "> " + strings.ReplaceAll(strings.TrimSpace(text), "\n", "\n> ")
}
