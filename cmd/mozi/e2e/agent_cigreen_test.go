//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Behaviours of the waiting-for-a-person tests (cigreen_test.go), from the
// agent's env:
//
//	E2E_ASK   a coder's issue_assigned run whose prompt carries no answer
//	          asks this question in its [Action Report] and stops; a run
//	          whose prompt carries an answer says so in a comment, then
//	          works as usual (push, pull request, report)
const askEnv = "E2E_ASK"

// answerRE finds the answer a person gave in the prompt (prompts' answer
// section, English labels).
var answerRE = regexp.MustCompile(`answered your question\n(?:The question:\n(?:> .*\n)+)?The answer:\n> (.*)`)

// askFirst is E2E_ASK: it reports whether the run is over (it asked).
func (a *agentRun) askFirst(ctx context.Context) (bool, error) {
	question := os.Getenv(askEnv)
	m := answerRE.FindStringSubmatch(a.prompt)
	switch {
	case m != nil:
		fmt.Printf("e2e agent: the prompt carries the answer %q\n", m[1])
		return false, a.comment(ctx, a.issue, "The e2e agent read the answer: "+strings.TrimSpace(m[1]))
	case question == "":
		return false, nil
	}
	fmt.Printf("e2e agent: asking %q\n", question)
	return true, a.comment(ctx, a.issue, fmt.Sprintf("[Action Report]\n**Status**: blocked\n**Question**: %s", question))
}
