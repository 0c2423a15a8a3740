package prompts

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
)

type fakeLogs struct {
	tail string
	err  error
	asks []string
}

func (f *fakeLogs) JobLogTail(_ context.Context, repo, targetURL string, lines int) (string, error) {
	f.asks = append(f.asks, repo+" "+targetURL)
	return f.tail, f.err
}

func TestRepairRoundPromptCarriesWhatFailed(t *testing.T) {
	w := newWorld(t)
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	b := NewBuilder(set, nil, 0)
	ci := w.find(t, task.ActionCIFailure, "coder2", "")
	ci.Meta.CIRound, ci.Meta.StatusDesc = 2, "Failing after 12s"
	tests := []struct {
		name      string
		logs      *fakeLogs
		want      []string
		wantNotIn []string
	}{
		{name: "the log's tail", logs: &fakeLogs{tail: "--- FAIL: TestLimiter\nFAIL widget 0.2s"},
			want:      []string{"Repair round 2 of 3", "Failing after 12s", "--- FAIL: TestLimiter\nFAIL widget 0.2s"},
			wantNotIn: []string{"could not be read"}},
		{name: "a log that cannot be read", logs: &fakeLogs{err: errors.New("Gitea answered 403 Forbidden")},
			want: []string{"Repair round 2 of 3", "could not be read (Gitea answered 403 Forbidden)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssembler(AssemblerConfig{Set: set, CILogs: tc.logs, LogTailLines: 5, MaxRepairRounds: 3})
			in := w.input(t, promptCase{task: ci})
			in.CILog = a.ciLog(context.Background(), ci)
			p, err := b.Build(in)
			require.NoError(t, err)
			for _, s := range tc.want {
				assert.Contains(t, p.Text, s)
			}
			for _, s := range tc.wantNotIn {
				assert.NotContains(t, p.Text, s)
			}
			assert.Equal(t, []string{ci.Repo + " " + ci.Meta.TargetURL}, tc.logs.asks)
		})
	}
}

func TestAnsweredTaskPromptCarriesTheAnswer(t *testing.T) {
	w := newWorld(t)
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	bug := w.find(t, task.ActionIssueAssigned, "coder1", task.BusinessBug)
	p := w.build(t, NewBuilder(set, nil, 0), promptCase{task: bug})
	assert.NotContains(t, p.Text, "answered your question")

	bug.Meta.Question, bug.Meta.Answer, bug.Meta.AnsweredBy = "Which limit: per user or per IP?", "Per user.", "alice"
	p = w.build(t, NewBuilder(set, nil, 0), promptCase{task: bug})
	assert.Contains(t, p.Text, "## alice answered your question\nThe question:\n> Which limit: per user or per IP?\nThe answer:\n> Per user.")
}
