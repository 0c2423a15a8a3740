//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
)

// The test binary doubles as the agents' program: with E2E_AGENT_ROLE set,
// TestMain runs agentMain instead of the tests. It runs inside mozi's
// sandbox as the agents' user, in the worktree mozi prepared, and works
// the way an agent must: through git and Gitea's API with its own token
// (GITEA_TOKEN), finishing with the [Action Report] its prompt asks for.
//
// Behaviours, from the agent's env in mozi's configuration:
//
//	E2E_AGENT_ROLE    coder, reviewer, lead, idle (does nothing and exits 0),
//	                  or talker (prints a line every half-second: console_browser_test.go)
//	E2E_REVIEWERS     logins a coder asks to review its pull request
//	E2E_REJECT_FIRST  a reviewer requests changes in its first review of a PR
//	E2E_LEAD          a reviewer who approves asks this login to merge
//	E2E_MENTION       a report mentions this login (mention chains)
//	E2E_CI_FIX        a coder pushes a fix for a CI failure
//	E2E_SLEEP         a run first sleeps this long (a Go duration)
//	E2E_SLEEP_ON      … only runs of these actions (comma-separated; default all)
//	E2E_LINGER        a run that did its work stays this long before it exits
//	E2E_WAIT_FILE     a run first waits until this file exists in its home
//	E2E_FAIL          a run exits 1 without doing anything
//	E2E_REVIEW_TURN   a coder answers a review round in one turn (agent_reviewturn_test.go)
//	E2E_ASK           a coder asks a question first (agent_cigreen_test.go)
//	E2E_MODEL_FILE    a coder commits this file of the worktree too, when it
//	                  exists (what a real CLI's shell tool wrote before it
//	                  ran this program: see cli_test.go)
const agentRoleEnv = "E2E_AGENT_ROLE"

// runsFile, in the agent's home, records each run's start and end: the
// tests check from it that two runs of one agent never overlapped.
const runsFile = "e2e-runs"

type agentRun struct {
	role, action, repo, branch string
	issue, pr, task, attempt   int
	login                      string
	api                        realgitea.Client
	token                      realgitea.Credentials
	prompt                     string
}

func agentMain() int {
	a := agentRun{
		role: os.Getenv(agentRoleEnv), action: os.Getenv("MOZI_ACTION"), repo: os.Getenv("MOZI_REPO"),
		issue: atoi(os.Getenv("MOZI_ISSUE")), pr: atoi(os.Getenv("MOZI_PR")), task: atoi(os.Getenv("MOZI_TASK_ID")),
		attempt: atoi(os.Getenv("MOZI_ATTEMPT")), login: os.Getenv("MOZI_AGENT"),
		api:   realgitea.Client{URL: strings.TrimSuffix(os.Getenv("MOZI_GITEA_URL"), "/")},
		token: realgitea.Token(os.Getenv("GITEA_TOKEN")),
	}
	release := a.record()
	defer release()
	// Stopped by mozi: the end is noted too.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		release()
		os.Exit(143)
	}()
	fmt.Printf("e2e agent %s (%s): task %d, %s on %s#%d (pr %d), attempt %d\n", a.login, a.role, a.task, a.action,
		a.repo, a.issue, a.pr, a.attempt)
	if f := os.Getenv("E2E_WAIT_FILE"); f != "" {
		fmt.Printf("e2e agent: waiting for %s\n", f)
		for {
			if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), f)); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if d, err := time.ParseDuration(os.Getenv("E2E_SLEEP")); err == nil {
		if on := os.Getenv("E2E_SLEEP_ON"); on == "" || slices.Contains(strings.Split(on, ","), a.action) {
			fmt.Printf("e2e agent: sleeping %s\n", d)
			time.Sleep(d)
		}
	}
	if os.Getenv("E2E_FAIL") != "" {
		fmt.Println("e2e agent: failing on purpose")
		return 1
	}
	prompt, err := os.ReadFile(os.Getenv("MOZI_PROMPT_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e agent: no prompt:", err)
		return 2
	}
	a.prompt = string(prompt)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := a.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e agent:", err)
		return 1
	}
	if d, err := time.ParseDuration(os.Getenv("E2E_LINGER")); err == nil {
		fmt.Printf("e2e agent: %s done, lingering %s\n", time.Now().Format("15:04:05.000"), d)
		time.Sleep(d)
	}
	return 0
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// record notes the run's start and end in the agent's home; a run that
// finds another run of its agent holding the lock notes the overlap.
func (a *agentRun) record() func() {
	home := os.Getenv("HOME")
	note := func(what string) {
		f, err := os.OpenFile(filepath.Join(home, runsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e agent: record:", err)
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "%s task=%d attempt=%d at=%d in=%s\n", what, a.task, a.attempt, time.Now().UnixNano(), runsIn())
	}
	lock, err := os.OpenFile(filepath.Join(home, ".e2e-lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err == nil && syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		note("overlap")
	}
	note("start")
	var once sync.Once
	return func() {
		once.Do(func() {
			note("end")
			if lock != nil {
				lock.Close()
			}
		})
	}
}

// runsIn says where this run is: "container" inside one (podman and
// Docker leave a marker file at its root), else "host".
func runsIn() string {
	for _, marker := range []string{"/run/.containerenv", "/.dockerenv"} {
		if _, err := os.Stat(marker); err == nil {
			return "container"
		}
	}
	return "host"
}

// call is a Gitea API call that retries what a busy Gitea answers with
// 5xx ("branch does not exist" right after its push, a git command it
// killed), as an agent would.
func (a *agentRun) call(ctx context.Context, method, path string, in, out any) error {
	var apiErr *realgitea.APIError
	for try := 1; ; try++ {
		err := a.api.Call(ctx, a.token, method, path, in, out)
		if err == nil || !errors.As(err, &apiErr) || apiErr.Status < 500 || try == 10 {
			return err
		}
		fmt.Printf("e2e agent: %s %s: %d, trying again\n", method, path, apiErr.Status)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 500 * time.Millisecond):
		}
	}
}

func (a *agentRun) run(ctx context.Context) error {
	switch a.action {
	case "review_merged", "issue_closed":
		return nil // notifications
	}
	if a.role == "coder" && os.Getenv(reviewTurnEnv) != "" {
		if handled, err := a.reviewTurn(ctx); handled {
			return err
		}
	}
	switch a.role {
	case "coder":
		return a.coder(ctx)
	case "reviewer":
		return a.reviewer(ctx)
	case "lead":
		return a.lead(ctx)
	case "idle":
		return nil
	case "talker":
		return a.talk()
	}
	return fmt.Errorf("unknown role %q", a.role)
}

func (a *agentRun) coder(ctx context.Context) error {
	switch a.action {
	case "issue_assigned":
		if asked, err := a.askFirst(ctx); asked || err != nil {
			return err
		}
		if err := a.commitAndPush(ctx, fmt.Sprintf("work/%d.txt", a.issue), fmt.Sprintf("Work on #%d", a.issue)); err != nil {
			return err
		}
		pr, err := a.openPull(ctx)
		if err != nil {
			return err
		}
		a.pr = pr
		return a.report(ctx, a.issue, "")
	case "review_result":
		rejected, err := a.latestReviewRejected(ctx)
		if err != nil || !rejected {
			return err // approved: the merge finishes the task
		}
		return a.commitAndPush(ctx, fmt.Sprintf("work/%d-review.txt", a.pr), "Address the review")
	case "ci_failure":
		if os.Getenv("E2E_CI_FIX") != "" {
			if err := a.commitAndPush(ctx, fmt.Sprintf("work/%d-ci-%d.txt", a.pr, a.task), "Fix CI"); err != nil {
				return err
			}
		}
		return a.report(ctx, a.issue, "")
	default: // mention, discussion, review_comment, round_review
		return a.report(ctx, a.issue, os.Getenv("E2E_MENTION"))
	}
}

func (a *agentRun) reviewer(ctx context.Context) error {
	switch a.action {
	case "review_request", "review_updated":
		var reviews []struct {
			State string
			User  struct{ Login string }
		}
		if err := a.call(ctx, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d/reviews", a.repo, a.pr), nil, &reviews); err != nil {
			return err
		}
		mine := 0
		for _, r := range reviews {
			if strings.EqualFold(r.User.Login, a.login) && r.State != "REQUEST_REVIEW" {
				mine++
			}
		}
		event, body := "APPROVED", "Looks good to me."
		if os.Getenv("E2E_REJECT_FIRST") != "" && mine == 0 {
			event, body = "REQUEST_CHANGES", "Please cover the review case too."
		}
		if err := a.call(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", a.repo, a.pr),
			map[string]any{"event": event, "body": body}, nil); err != nil {
			return fmt.Errorf("submit review: %w", err)
		}
		fmt.Printf("e2e agent: reviewed #%d: %s\n", a.pr, event)
		if lead := os.Getenv("E2E_LEAD"); lead != "" && event == "APPROVED" {
			return a.comment(ctx, a.pr, fmt.Sprintf("Approved. @%s please merge.", lead))
		}
		return nil
	default:
		return a.report(ctx, a.issue, os.Getenv("E2E_MENTION"))
	}
}

func (a *agentRun) lead(ctx context.Context) error {
	if a.action == "mention" && a.pr != 0 {
		err := a.call(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/merge", a.repo, a.pr),
			map[string]any{"Do": "merge", "delete_branch_after_merge": false}, nil)
		var apiErr *realgitea.APIError
		if err != nil && !(errors.As(err, &apiErr) && apiErr.Status == http.StatusMethodNotAllowed) {
			return fmt.Errorf("merge #%d: %w", a.pr, err)
		}
		fmt.Printf("e2e agent: merged #%d\n", a.pr)
	}
	return a.report(ctx, a.issue, os.Getenv("E2E_MENTION"))
}

// git runs git in the worktree.
func (a *agentRun) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME="+a.login, "GIT_AUTHOR_EMAIL="+a.login+"@example.test",
		"GIT_COMMITTER_NAME="+a.login, "GIT_COMMITTER_EMAIL="+a.login+"@example.test", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func (a *agentRun) commitAndPush(ctx context.Context, path, message string) error {
	branch, err := a.git(ctx, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return err
	}
	if branch == "HEAD" {
		return errors.New("the worktree is detached: no branch to work on")
	}
	a.branch = branch
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	content := fmt.Sprintf("task %d, attempt %d, %s\n", a.task, a.attempt, time.Now().Format(time.RFC3339Nano))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return err
	}
	add := []string{"add", path}
	if f := os.Getenv("E2E_MODEL_FILE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			add = append(add, f)
		}
	}
	for _, args := range [][]string{add, {"commit", "-q", "-m", message}, {"push", "-u", "origin", "HEAD"}} {
		fmt.Printf("e2e agent: %s git %s\n", time.Now().Format("15:04:05.000"), args[0])
		if out, err := a.git(ctx, args...); err != nil {
			return err
		} else if out != "" {
			fmt.Println(out)
		}
	}
	fmt.Printf("e2e agent: pushed %s to %s\n", path, branch)
	return nil
}

// openPull opens the pull request of the worktree's branch (or finds the
// one an earlier attempt opened) and asks for the configured reviews.
func (a *agentRun) openPull(ctx context.Context) (int, error) {
	var open []struct {
		Number int
		Head   struct{ Ref string }
	}
	if err := a.call(ctx, http.MethodGet, "/repos/"+a.repo+"/pulls?state=open&limit=50", nil, &open); err != nil {
		return 0, err
	}
	number := 0
	for _, p := range open {
		if p.Head.Ref == a.branch {
			number = p.Number
		}
	}
	if number == 0 {
		fmt.Printf("e2e agent: %s opening a pull request\n", time.Now().Format("15:04:05.000"))
		var created struct{ Number int }
		if err := a.call(ctx, http.MethodPost, "/repos/"+a.repo+"/pulls", map[string]any{
			"head": a.branch, "base": "main", "title": fmt.Sprintf("Work on #%d", a.issue),
			"body": fmt.Sprintf("Closes #%d\n\nDone by the e2e agent.", a.issue),
		}, &created); err != nil {
			return 0, fmt.Errorf("open pull request: %w", err)
		}
		number = created.Number
		fmt.Printf("e2e agent: opened #%d\n", number)
	}
	if r := os.Getenv("E2E_REVIEWERS"); r != "" {
		if err := a.call(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/requested_reviewers", a.repo, number),
			map[string]any{"reviewers": strings.Split(r, ",")}, nil); err != nil {
			return 0, fmt.Errorf("request reviews: %w", err)
		}
	}
	return number, nil
}

func (a *agentRun) latestReviewRejected(ctx context.Context) (bool, error) {
	var reviews []struct{ State string }
	if err := a.call(ctx, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d/reviews", a.repo, a.pr), nil, &reviews); err != nil {
		return false, err
	}
	for i := len(reviews) - 1; i >= 0; i-- {
		switch reviews[i].State {
		case "REQUEST_CHANGES":
			return true, nil
		case "APPROVED":
			return false, nil
		}
	}
	return false, nil
}

func (a *agentRun) comment(ctx context.Context, number int, body string) error {
	fmt.Printf("e2e agent: %s commenting on #%d\n", time.Now().Format("15:04:05.000"), number)
	if err := a.call(ctx, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", a.repo, number),
		map[string]any{"body": body}, nil); err != nil {
		return fmt.Errorf("comment on #%d: %w", number, err)
	}
	return nil
}

var (
	reportBlockRE = regexp.MustCompile("(?s)```\\s*\\n(\\[Action Report\\].*?)```")
	fieldRE       = regexp.MustCompile(`(?m)^\*\*([^*]+)\*\*:.*$`)
)

// report posts the [Action Report] the prompt asks for, each field filled.
func (a *agentRun) report(ctx context.Context, number int, mention string) error {
	blocks := reportBlockRE.FindAllStringSubmatch(a.prompt, -1)
	if len(blocks) == 0 {
		return errors.New("the prompt asks for no [Action Report]")
	}
	body := fieldRE.ReplaceAllStringFunc(strings.TrimSpace(blocks[len(blocks)-1][1]), func(line string) string {
		field := fieldRE.FindStringSubmatch(line)[1]
		value := fmt.Sprintf("done by the e2e agent (task %d)", a.task)
		switch strings.ToLower(field) {
		case "branch":
			if a.branch != "" {
				value = a.branch
			}
		case "pr":
			if a.pr != 0 {
				value = fmt.Sprintf("#%d", a.pr)
			}
		}
		return fmt.Sprintf("**%s**: %s", field, value)
	})
	if mention != "" {
		body += fmt.Sprintf("\n\n@%s over to you.", mention)
	}
	return a.comment(ctx, number, body)
}
