//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/repository/gitea/realgitea"
)

// The viewport of every page, and so of the screenshots.
const viewportWidth, viewportHeight = 1280, 800

// cdpDebugEnv, set, logs every DevTools protocol message the test and
// Chromium exchange: what to read when a step hangs.
const cdpDebugEnv = "MOZI_CDP_DEBUG"

// stepTimeout bounds one browser step (a navigation, a click and the page
// it leads to): a step that hangs fails with what it waited for instead of
// running into go test's timeout.
const stepTimeout = 45 * time.Second

// startChromium starts one headless Chromium for the test and returns a
// context that holds it; each person gets a browser context of their own
// from it (person). Without chromium on the PATH the test skips on a
// developer's machine and fails in CI.
func startChromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	realgitea.Need(t, "headless Chromium (apt-get install chromium)", err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		// Root (CI, this machine) cannot use Chromium's sandbox; the
		// pages are the test's own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(viewportWidth, viewportHeight),
		// Everything is on loopback: a proxy from the environment must
		// not see it.
		chromedp.Flag("no-proxy-server", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctxOpts := []chromedp.ContextOption{chromedp.WithErrorf(t.Logf)}
	if os.Getenv(cdpDebugEnv) != "" {
		ctxOpts = append(ctxOpts, chromedp.WithDebugf(func(format string, args ...any) {
			if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "Network.dataReceived") {
				t.Log(msg)
			}
		}))
	}
	ctx, cancel := chromedp.NewContext(allocCtx, ctxOpts...)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser and binds the browser's life to
	// the context it is given: a context with a timeout would end the
	// browser with it. So the start gets ctx itself, and a timer ends a
	// start that hangs.
	start := time.Now()
	hung := time.AfterFunc(time.Minute, cancel)
	err = chromedp.Do(ctx)
	hung.Stop()
	require.NoError(t, err, "start %s (within a minute)", path)
	t.Logf("chromium started in %s", time.Since(start).Round(time.Millisecond))
	return ctx
}

// person is one browser context of the test's Chromium: cookies of its
// own, as a separate person on a separate machine has.
type person struct {
	t    *testing.T
	name string
	ctx  context.Context

	mu      sync.Mutex
	dialogs []string // the JavaScript dialogs the person closed, for messages
}

func newPerson(t *testing.T, browser context.Context, name string) *person {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &person{t: t, name: name, ctx: ctx}
	// As with the browser, the first action opens the tab and binds the
	// tab's life to its context: it must be ctx, not a step's context
	// with a timeout, or the tab stops reading the browser's messages
	// when that step ends and every later step hangs.
	hung := time.AfterFunc(stepTimeout, cancel)
	err := chromedp.Do(ctx, chromedp.EmulateViewport(viewportWidth, viewportHeight))
	hung.Stop()
	require.NoError(t, err, "%s: open a tab", name)
	// The e2e suite's Gitea is built from its Go module, which has no
	// frontend bundle: every Gitea page alerts "Failed to load asset
	// files". An open alert blocks the page — its load event, every
	// script the test evaluates — so a navigation to Gitea never ends.
	// The person closes each dialog, as anyone would, and the pages work
	// without their scripts.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				if ctx.Err() == nil {
					p.mu.Lock()
					p.dialogs = append(p.dialogs, fmt.Sprintf("no more dialogs seen: %v", err))
					p.mu.Unlock()
				}
				return
			}
			note := fmt.Sprintf("%s dialog %q", ev.Type, ev.Message)
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog,
				page.HandleJavaScriptDialogParams{Accept: true}); err != nil && ctx.Err() == nil {
				note += fmt.Sprintf(" (could not close it: %v)", err)
			}
			p.mu.Lock()
			p.dialogs = append(p.dialogs, note)
			p.mu.Unlock()
		}
	}()
	return p
}

// do runs steps within stepTimeout; a failure says what the person was
// doing and where the page was.
func (p *person) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("%s: %s: %v (page at %s; %s)", p.name, what, err, p.location(), p.closedDialogs())
	}
}

// location is the page's URL, for messages.
func (p *person) location() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		loc = "unknown: " + err.Error()
	}
	return loc
}

// closedDialogs says which JavaScript dialogs the person closed.
func (p *person) closedDialogs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dialogs) == 0 {
		return "no dialog closed"
	}
	return "closed " + strings.Join(p.dialogs, ", ")
}

// open navigates to u and waits until sel is visible. Navigate alone
// waits for the load event of the page the redirects end at.
func (p *person) open(u, sel string) {
	p.t.Helper()
	p.do("open "+u+" and see "+sel, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// status navigates to u and returns the HTTP status of the document it
// ends at.
func (p *person) status(u string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	require.NoError(p.t, err, "%s: open %s", p.name, u)
	return int(resp.Status)
}

// eval evaluates a JavaScript expression in the page.
func evalIn[T any](p *person, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(p.t, err, "%s: evaluate %s", p.name, expr)
	return v
}

// text is the text of the first element sel selects ("" when none).
func (p *person) text(sel string) string {
	p.t.Helper()
	return evalIn[string](p, fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel))
}

// waitFor polls cond (against the page, through the person) until it
// holds; the deadline is a bound, not a measurement.
func (p *person) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: timed out after %s waiting for %s; last seen: %s (page at %s)", p.name, timeout, what,
				seen, p.location())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// signIn signs u in to the console at consoleURL the way a person does:
// the console sends the browser to Gitea's sign-in page, the person types
// their name and password, grants the console access on Gitea's consent
// page (the first time), and is back at the console, signed in.
func (p *person) signIn(consoleURL, giteaURL string, u realgitea.User) {
	p.t.Helper()
	p.open(consoleURL+"/", "#user_name")
	require.True(p.t, strings.HasPrefix(p.location(), giteaURL+"/user/login"),
		"%s: the console sends an anonymous person to Gitea's sign-in, not to %s", p.name, p.location())
	p.do("type the name and password into Gitea's sign-in form",
		chromedp.SendKeys(chromedp.ID("user_name"), u.Login),
		chromedp.SendKeys(chromedp.ID("password"), u.Password+"\r"))
	// Either Gitea asks whether to let the console in, or (granted
	// before) the browser is back at the console.
	var at string
	p.waitFor("Gitea's consent page or the console", stepTimeout, func() (bool, string) {
		at = evalIn[string](p, `document.querySelector("#authorize-app") ? "consent" :
			document.querySelector("#who") ? "console" : ""`)
		return at != "", p.location()
	})
	if at == "consent" {
		p.do("grant the console access on Gitea's consent page",
			chromedp.Click(chromedp.ID("authorize-app")), chromedp.WaitVisible(chromedp.ID("who")))
	}
	require.True(p.t, strings.HasPrefix(p.location(), consoleURL), "%s: back at the console, not %s", p.name, p.location())
	require.Equal(p.t, u.Login, p.text("#who"), "%s: the console names who signed in", p.name)
}

// screenshot saves the viewport as dir/name.png when dir is set
// (MOZI_CONSOLE_SCREENSHOTS).
func (p *person) screenshot(dir, name string) {
	p.t.Helper()
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(p.t, err, "screenshot %s", name)
	require.NoError(p.t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, name+".png")
	require.NoError(p.t, os.WriteFile(file, png, 0o644))
	p.t.Logf("screenshot %s (%d KB)", file, len(png)/1024)
}

// follow clicks what sel selects (a link, a form's button) and waits for
// the page it leads to; it returns that page's HTTP status.
func (p *person) follow(sel string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		p.t.Fatalf("%s: click %s: %v (page at %s)", p.name, sel, err, p.location())
	}
	return int(resp.Status)
}
