//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
	"github.com/moziplus/mozi/repository/task"
	"github.com/moziplus/mozi/webhook/console"
)

// screenshotsEnv names the directory the browser test saves its
// screenshots of the console's pages in (docs/console/ regenerates the
// documentation's).
const screenshotsEnv = "MOZI_CONSOLE_SCREENSHOTS"

// TestE2EConsoleInABrowser drives the web console of a real mozi serve in
// headless Chromium: a writer of a private repository signs in through
// Gitea's own sign-in and consent pages, opens the task an agent is
// working on and its run, sees the transcript grow as the agent prints,
// presses Stop and sees the task cancelled and the agent's process
// ended; an outsider sees none of the repository's tasks, and its task,
// run and stream answer 404; an anonymous browser is sent to sign in.
func TestE2EConsoleInABrowser(t *testing.T) {
	t.Parallel()
	shots := os.Getenv(screenshotsEnv)
	browser := startChromium(t)
	ctx := context.Background()
	g := realgitea.Shared(t)

	// The console's address is in its OAuth application's redirect URI,
	// registered before mozi starts.
	addr := freeAddr(t)
	consoleURL := "http://" + addr
	app, err := console.Register(ctx, http.DefaultClient, g.URL, g.AdminToken, "mozi console "+addr,
		consoleURL+"/auth/callback")
	require.NoError(t, err)
	w := newWorld(t, worldOptions{noStart: true,
		agents: []agentSpec{{name: "talker", role: "talker", timeout: 15 * time.Minute}},
		tune: func(cfg map[string]any) {
			cfg["console"] = map[string]any{"listen": addr, "public_url": consoleURL,
				"oauth": map[string]any{"client_id": app.ClientID}}
		}})
	w.env = append(w.env, "MOZI_CONSOLE_CLIENT_SECRET="+app.ClientSecret)
	require.NoError(t, g.Call(ctx, realgitea.Token(g.AdminToken), http.MethodPatch, "/repos/"+w.repo,
		map[string]any{"private": true}, nil))
	outsider, err := g.CreateUser(ctx, w.id+"-outsider", false)
	require.NoError(t, err)
	w.start()

	talker := w.login("talker")
	w.createIssue("Tell us what you are doing", "Talk for a while.", talker)
	running := w.waitTask("the talker's task", 2*time.Minute, task.StatusWorking, isAction(task.ActionIssueAssigned, talker))
	taskURL := consoleURL + "/tasks/" + strconv.FormatInt(running.ID, 10)
	runURL := taskURL + "/runs/1"

	// The writer (the world's human administers the repository).
	writer := newPerson(t, browser, "the writer")
	writer.signIn(consoleURL, g.URL, w.human)
	writer.open(consoleURL+"/", "#tasks")
	assert.Equal(t, "working", writer.text(fmt.Sprintf(`#tasks tr[data-task="%d"] td.st-working`, running.ID)),
		"the writer sees the private repository's task, working")
	writer.screenshot(shots, "tasks")

	require.Equal(t, http.StatusOK, writer.follow(fmt.Sprintf(`#tasks tr[data-task="%d"] a`, running.ID)), "open the task")
	assert.Equal(t, taskURL, writer.location())
	assert.Equal(t, "working", writer.text("#state"))
	writer.screenshot(shots, "task")

	require.Equal(t, http.StatusOK, writer.follow(`a[href$="/runs/1"]`), "open its run")
	assert.Equal(t, runURL, writer.location())
	assert.Equal(t, "running", writer.text("#outcome"))
	// The transcript grows while the page is open: the lines come over
	// the stream, not from a reload.
	logLines := func() int {
		return evalIn[int](writer, `document.getElementById("log").textContent.split("\n").filter(l => l.includes("talker: line")).length`)
	}
	marker := "page-" + randSuffix()
	evalIn[bool](writer, fmt.Sprintf(`(window.__page = %q, true)`, marker))
	first := logLines()
	writer.waitFor("the transcript to grow", time.Minute, func() (bool, string) {
		n := logLines()
		return n >= first+3, fmt.Sprintf("%d lines, %d at first", n, first)
	})
	assert.Equal(t, marker, evalIn[string](writer, `window.__page || ""`), "the same page, not a reload")
	writer.screenshot(shots, "run")

	writer.open(consoleURL+"/deliveries", "main table")
	assert.Contains(t, writer.text("main table"), w.repo, "the writer sees the repository's deliveries")
	writer.screenshot(shots, "deliveries")
	writer.open(consoleURL+"/agents", "main table")
	assert.Contains(t, writer.text("main table"), talker)
	writer.screenshot(shots, "agents")

	// An outsider signs in on another machine.
	other := newPerson(t, browser, "the outsider")
	other.signIn(consoleURL, g.URL, outsider)
	other.open(consoleURL+"/", "#tasks")
	tasks := other.text("#tasks")
	assert.NotContains(t, tasks, w.repo, "the outsider sees none of the private repository's tasks")
	assert.Zero(t, evalIn[int](other, `document.querySelectorAll("#tasks tr[data-task]").length`))
	assert.Equal(t, http.StatusNotFound, other.status(taskURL), "the task is no one's business of the outsider")
	assert.Equal(t, http.StatusNotFound, other.status(runURL))
	assert.Equal(t, http.StatusNotFound, other.status(runURL+"/stream"), "nor its stream")

	// Anonymous: sent to sign in, shown nothing.
	anonymous := newPerson(t, browser, "an anonymous person")
	anonymous.open(taskURL, "#user_name")
	assert.True(t, strings.HasPrefix(anonymous.location(), g.URL+"/user/login"), "sent to sign in, at %s", anonymous.location())
	assert.NotContains(t, evalIn[string](anonymous, `document.body.textContent`), w.repo)
	assert.Equal(t, http.StatusUnauthorized, anonymous.status(runURL+"/stream"), "the stream refuses an anonymous person")

	// Stop, as the writer, with the page's own button (and its CSRF
	// token); the agent is still talking.
	writer.open(taskURL, "#stop")
	require.Equal(t, http.StatusOK, writer.follow("#stop"), "press Stop: back at the task")
	writer.waitFor("the task's state to show cancelled", stepTimeout, func() (bool, string) {
		s := writer.text("#state")
		return s == string(task.StatusCancelled), s
	})
	got, err := w.store.Task(ctx, running.ID)
	require.NoError(t, err)
	assert.Equal(t, task.StatusCancelled, got.Status)
	assert.NotContains(t, evalIn[string](writer, `document.body.innerHTML`), `id="stop"`, "nothing left to stop")
	// mozi ends the agent whose task was cancelled: the run ends, and its
	// page says so.
	w.waitRunsRecorded()
	attempts, err := w.store.Attempts(ctx, running.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	assert.Equal(t, task.AttemptStopped, attempts[0].Outcome, "mozi stopped the agent")
	writer.open(runURL, "#outcome")
	assert.Equal(t, task.AttemptStopped, writer.text("#outcome"), "the run page says the run was stopped")
	assert.Contains(t, writer.text("#log"), "talker: line")
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// talk is the talker role: a line every half-second, as an agent thinking
// aloud does, until mozi stops it (or ten minutes pass: far more than the
// test needs under load).
func (a *agentRun) talk() error {
	for i := 1; i <= 1200; i++ {
		fmt.Printf("talker: line %d of task %d\n", i, a.task)
		time.Sleep(500 * time.Millisecond)
	}
	return nil
}
