package prompts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/templates"
)

// sampleRound is a round of two reviews, one with inline comments on a
// new and on a removed line, and a loose comment.
func sampleRound() *task.ReviewRound {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	return &task.ReviewRound{Reviews: []task.RoundReview{
		{ID: 7, Reviewer: "alice", State: "REQUEST_CHANGES", Body: "A few things.", At: at, Comments: []task.LineComment{
			{ID: 1, Path: "config/load.go", Line: 12, DiffHunk: "@@ -10,3 +10,4 @@\n func Load() {\n+\tm := map[string]int{}", Body: "Name it `counts`."},
			{ID: 2, Path: "config/load_test.go", OldLine: 4, DiffHunk: "@@ -1,5 +1,4 @@\n-\told()", Body: "Why remove this?"},
		}},
		{ID: 8, Reviewer: "bob", State: "COMMENT", At: at.Add(time.Minute), Comments: []task.LineComment{
			{ID: 3, Path: "README.md", Line: 3, Body: "Typo: teh."},
		}},
	}, Loose: []task.Comment{{ID: 9, Author: "carol", Body: "Also update the changelog.", CreatedAt: at.Add(2 * time.Minute)}}}
}

func TestRoundBlockListsEveryComment(t *testing.T) {
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	in := &Input{Task: task.Task{Repo: "acme/widget", IssueNumber: 4, PRNumber: 4, ActionType: task.ActionReviewResult,
		Agent: "coder2"}, Round: sampleRound()}
	in.Round.Loose = append(in.Round.Loose, task.Comment{Author: "dave", Body: "Keep {title} as it is."})
	r := &Renderer{In: in, Set: set, Vars: in.vars()}
	text := roundBlock(r, in.Round)
	for _, want := range []string{
		"Review by alice: changes requested", "> A few things.",
		"1. `config/load.go:12`", "+\tm := map[string]int{}", "> Name it `counts`.",
		"2. `config/load_test.go:4` (-)", "-\told()", "> Why remove this?",
		"Review by bob: commented", "1. `README.md:3`",
		"> Typo: teh.", "> Keep {title} as it is.", // someone else's words are not templates
		"carol wrote:", "> Also update the changelog.",
		"one push, one summary comment, one re-request",
	} {
		assert.Contains(t, text, want)
	}
	assert.Empty(t, roundBlock(r, &task.ReviewRound{}), "nothing to answer: no block")
	assert.Empty(t, roundBlock(r, nil))
}

func TestRoundBlockStaysWithinBudget(t *testing.T) {
	set, err := templates.Load("en", "")
	require.NoError(t, err)
	round := &task.ReviewRound{}
	for i := range 20 {
		rv := task.RoundReview{ID: int64(i), Reviewer: "alice", State: "COMMENT"}
		for j := range 10 {
			rv.Comments = append(rv.Comments, task.LineComment{Path: "a.go", Line: j + 1,
				DiffHunk: strings.Repeat("+x\n", 2000), Body: strings.Repeat("word ", 100)})
		}
		round.Reviews = append(round.Reviews, rv)
	}
	in := &Input{Task: task.Task{Repo: "acme/widget", PRNumber: 4, ActionType: task.ActionReviewComment}, Round: round}
	r := &Renderer{In: in, Set: set, Vars: in.vars()}
	text := roundBlock(r, round)
	assert.LessOrEqual(t, len(text), roundBudget)
	assert.Contains(t, text, "cut by mozi")
}

type fakeReviews struct {
	asked  []string
	round  task.ReviewRound
	err    error
	ignore []string
}

func (f *fakeReviews) ReviewRound(_ context.Context, repo string, number int, q task.RoundQuery) (task.ReviewRound, error) {
	f.asked = append(f.asked, fmt.Sprintf("%s#%d/%s from %d", repo, number, q.Agent, q.FromComment))
	f.ignore = q.Ignore
	return f.round, f.err
}

func TestAssemblerReadsTheRoundOfReviewTasksOnly(t *testing.T) {
	for _, tc := range []struct {
		action task.ActionType
		pr     int
		reads  bool
	}{
		{task.ActionReviewResult, 4, true},
		{task.ActionReviewComment, 4, true},
		{task.ActionReviewComment, 0, false},
		{task.ActionMention, 4, false},
		{task.ActionIssueAssigned, 0, false},
	} {
		src := &fakeReviews{round: *sampleRound()}
		a := NewAssembler(AssemblerConfig{Reviews: src, BotUser: "mozi",
			Agents: map[string]Agent{"coder2": {Login: "coder2"}, "reviewer1": {Login: "reviewer1"}}})
		round, err := a.round(context.Background(), task.Task{Repo: "acme/widget", PRNumber: tc.pr,
			ActionType: tc.action, Agent: "coder2", Meta: task.Meta{Extra: map[string]string{task.ExtraRoundFrom: "41"}}})
		require.NoError(t, err)
		if !tc.reads {
			assert.Nil(t, round, "%s", tc.action)
			assert.Empty(t, src.asked, "%s", tc.action)
			continue
		}
		require.NotNil(t, round, "%s", tc.action)
		assert.Len(t, round.Reviews, 2)
		assert.Equal(t, []string{"acme/widget#4/coder2 from 41"}, src.asked)
		assert.ElementsMatch(t, []string{"mozi", "coder2", "reviewer1"}, src.ignore)
	}
	boom := errors.New("gitea down")
	a := NewAssembler(AssemblerConfig{Reviews: &fakeReviews{err: boom}})
	_, err := a.round(context.Background(), task.Task{Repo: "acme/widget", PRNumber: 4,
		ActionType: task.ActionReviewResult, Agent: "coder2"})
	assert.ErrorIs(t, err, boom)
}
