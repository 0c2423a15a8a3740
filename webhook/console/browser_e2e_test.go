//go:build e2e

package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/pgtest"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

// chromium finds Debian's headless browser: CI installs it (apt-get
// install chromium); elsewhere the test skips without it.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	realgitea.Need(t, "a Chromium for the browser test", fmt.Errorf("no chromium on PATH"))
	return ""
}

// TestE2EConsoleBrowser drives a real Chromium: it signs in through the
// real Gitea's pages, opens a running task's run and sees its transcript
// grow as the agent writes, stops the task and sees its state change.
// With CONSOLE_SCREENSHOTS=DIR it saves the main pages there.
func TestE2EConsoleBrowser(t *testing.T) {
	ctx := context.Background()
	chrome := chromium(t)
	g := realgitea.Shared(t)
	store := pgtest.Store(t)

	writer, err := g.CreateUser(ctx, "browser-writer", false)
	require.NoError(t, err)
	repo, err := g.CreateRepo(ctx, "", "browser-app", nil)
	require.NoError(t, err)
	require.NoError(t, g.AddCollaborator(ctx, repo, writer.Login, "write"))
	for i := 2; i <= 4; i++ {
		_, err := store.CreateTask(ctx, repository.NewTask{Repo: repo, IssueNumber: i,
			ActionType: task.ActionMention, Agent: "reviewer", Priority: task.DefaultPriority})
		require.NoError(t, err)
	}
	tk, err := store.CreateTask(ctx, repository.NewTask{Repo: repo, IssueNumber: 1,
		ActionType: task.ActionIssueAssigned, Agent: "coder", Priority: task.DefaultPriority})
	require.NoError(t, err)
	res, err := store.Apply(ctx, tk.ID, task.EventClaim, repository.Change{LeaseOwner: "r1"})
	require.NoError(t, err)
	require.True(t, res.Applied)
	claimed, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	logPath := filepath.Join(t.TempDir(), "run.log")
	require.NoError(t, os.WriteFile(logPath, []byte("Reading the issue\n"), 0o600))
	attempt, started, err := store.StartRun(ctx, claimed, "r1", logPath)
	require.NoError(t, err)
	require.True(t, started)

	var handler http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer hs.Close()
	app, err := console.Register(ctx, http.DefaultClient, g.URL, g.AdminToken, "mozi console browser", hs.URL+"/auth/callback")
	require.NoError(t, err)
	srv, err := console.New(console.Config{Store: store, GiteaURL: g.URL, PublicURL: hs.URL,
		ClientID: app.ClientID, ClientSecret: app.ClientSecret})
	require.NoError(t, err)
	handler = srv.Handler()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelTimeout()

	shots := os.Getenv("CONSOLE_SCREENSHOTS")
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if shots == "" {
				return nil
			}
			png, err := chromedp.FullScreenshot(90)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name), png, 0o644)
		})
	}

	// Sign in: the console sends the browser to Gitea, Gitea asks for the
	// password and then for consent, and sends it back.
	grant := chromedp.CSS(`[name="granted"][value="true"]`)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("user_name")),
		chromedp.SendKeys(chromedp.ID("user_name"), writer.Login),
		chromedp.SendKeys(chromedp.ID("password"), writer.Password),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(grant),
		chromedp.Click(grant),
		chromedp.WaitVisible(chromedp.ID("who")),
		shoot("console-tasks.png"),
	))
	who, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("who")))
	require.NoError(t, err)
	assert.Equal(t, writer.Login, who)
	list, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("tasks")))
	require.NoError(t, err)
	assert.Contains(t, list, repo+"#1")

	// The run page: what the agent wrote so far, then each line it writes.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(hs.URL+fmt.Sprintf("/tasks/%d/runs/%d", tk.ID, attempt.Attempt)),
		chromedp.WaitVisible(chromedp.ID("log"))))
	transcript, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("log")))
	require.NoError(t, err)
	assert.Contains(t, transcript, "Reading the issue")
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString(`{"type":"assistant","message":{"content":[{"type":"text","text":"Writing the fix"}]}}` + "\n")
	require.NoError(t, err)
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("log").textContent.includes("Writing the fix")`))
	require.NoError(t, err, "the transcript grows")
	require.NoError(t, chromedp.Do(bctx, shoot("console-run-live.png")))

	// Stop it from the task page: the task is cancelled, the page says so.
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(hs.URL+fmt.Sprintf("/tasks/%d", tk.ID)),
		chromedp.WaitVisible(chromedp.ID("stop")),
		shoot("console-task.png"),
		chromedp.Click(chromedp.ID("stop"))))
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("state") !== null && document.getElementById("state").textContent === "cancelled"`))
	require.NoError(t, err, "the page shows the task cancelled")
	state, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID("state")))
	require.NoError(t, err)
	assert.Equal(t, "cancelled", strings.TrimSpace(state))
	got, err := store.Task(ctx, tk.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusCancelled, got.Status)
}
