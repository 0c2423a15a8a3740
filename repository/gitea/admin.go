package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
)

// HookEvents are the Gitea webhook events mozi acts on, by the names
// Gitea's hook API takes and returns. Gitea expands "issues" and
// "pull_request" to every issue and pull request event; reviews are one
// event there ("pull_request_review"), delivered as
// pull_request_review_approved, _rejected or _comment. A Forgejo has no
// "status" event: see Forge.HookEvents.
var HookEvents = []string{
	"issues", "issue_assign", "issue_label", "issue_comment",
	"pull_request", "pull_request_assign", "pull_request_comment", "pull_request_review",
	"pull_request_sync", "pull_request_review_request", "status",
}

// Forge is the server mozi talks to: a Gitea, or a Forgejo (a fork that
// answers Gitea's API), which differ in the webhooks they can send.
type Forge struct {
	// Version is what the server's version API says.
	Version string
	// Forgejo is set for a Forgejo.
	Forgejo bool
}

func (f Forge) String() string {
	if f.Forgejo {
		return "Forgejo " + f.Version
	}
	return "Gitea " + f.Version
}

// HookEvents are the webhook events mozi asks this forge for. Forgejo has
// no commit status event (a hook created with "status" comes back
// without it), so there mozi learns of CI failures only from its status
// poll.
func (f Forge) HookEvents() []string {
	if f.Forgejo {
		return slices.DeleteFunc(slices.Clone(HookEvents), func(e string) bool { return e == "status" })
	}
	return slices.Clone(HookEvents)
}

// forgejoVersionPath is Forgejo's own version API, which Gitea lacks.
const forgejoVersionPath = "/api/forgejo/v1/version"

// DetectForge asks the server its version and whether it is a Forgejo:
// Forgejo's version says which Gitea it is compatible with
// (10.0.0+gitea-1.22.0), and Forgejo answers its own version API.
func (g *Client) DetectForge(ctx context.Context) (Forge, error) {
	version, err := g.ServerVersion(ctx)
	if err != nil {
		return Forge{}, err
	}
	f := Forge{Version: version, Forgejo: strings.Contains(version, "+gitea-")}
	if !f.Forgejo {
		f.Forgejo = g.answers(ctx, forgejoVersionPath)
	}
	return f, nil
}

// answers reports whether an anonymous GET of path gets a 200.
func (g *Client) answers(ctx context.Context, path string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+path, nil)
	if err != nil {
		return false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// reviewVerdicts are the delivery names of "pull_request_review", which a
// hook may list instead.
var reviewVerdicts = []string{"pull_request_review_approved", "pull_request_review_rejected", "pull_request_review_comment"}

// ErrMissingScope is returned when Gitea refuses a call because the token
// lacks a scope.
var ErrMissingScope = errors.New("the token lacks a required scope")

// Hook is a Gitea webhook as mozi sees it. Gitea never returns a hook's
// secret, so whether one is set cannot be read back.
type Hook struct {
	ID          int64
	Type        string
	URL         string
	ContentType string
	Events      []string
	Active      bool
}

// MissingEvents returns the events mozi needs from the forge that the
// hook does not send.
func (h Hook) MissingEvents(f Forge) []string {
	var out []string
	for _, e := range f.HookEvents() {
		if slices.Contains(h.Events, e) {
			continue
		}
		if e == "pull_request_review" && !slices.ContainsFunc(reviewVerdicts, func(v string) bool { return !slices.Contains(h.Events, v) }) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// HookScope is where a webhook lives: a repository (owner/name) or an
// organization.
type HookScope struct {
	Repo string
	Org  string
}

func (s HookScope) String() string {
	if s.Org != "" {
		return "organization " + s.Org
	}
	return s.Repo
}

// ServerVersion asks Gitea its version, anonymously first so that a wrong
// token is not mistaken for a wrong address (a Gitea that requires
// sign-in for everything is asked again with the token).
func (g *Client) ServerVersion(ctx context.Context) (string, error) {
	c, err := g.client(ctx, "")
	if err != nil {
		return "", err
	}
	v, resp, err := c.ServerVersion()
	if err != nil && resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && g.token != "" {
		if c, err = g.api(ctx); err != nil {
			return "", err
		}
		v, resp, err = c.ServerVersion()
	}
	if err != nil {
		return "", apiErr("get Gitea version", resp, err)
	}
	return v, nil
}

// WhoAmI returns the login mozi's token acts as.
func (g *Client) WhoAmI(ctx context.Context) (string, error) {
	c, err := g.api(ctx)
	if err != nil {
		return "", err
	}
	u, resp, err := c.GetMyUserInfo()
	if err != nil {
		return "", scopeErr("get the token's user", resp, err)
	}
	return u.UserName, nil
}

// RepoAdmin reports whether mozi's token may administer the repository
// (needed for its webhooks); an error when it cannot see it.
func (g *Client) RepoAdmin(ctx context.Context, repo string) (bool, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return false, err
	}
	r, resp, err := c.GetRepo(owner, name)
	if err != nil {
		return false, scopeErr("get repository "+repo, resp, err)
	}
	return r.Permissions != nil && r.Permissions.Admin, nil
}

// CanWriteIssues checks that the token has the write:issue scope without
// changing anything: it edits issue #0, which never exists, so Gitea
// answers 404 after its scope check, or 403 before it.
func (g *Client) CanWriteIssues(ctx context.Context, repo string) error {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return err
	}
	_, resp, err := c.EditIssue(owner, name, 0, sdk.EditIssueOption{Title: "mozi doctor scope probe"})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return nil
	}
	if err == nil {
		return errors.New("editing issue #0 succeeded: unexpected Gitea behaviour")
	}
	return scopeErr("probe write:issue on "+repo, resp, err)
}

// Hooks lists the webhooks of a repository or an organization.
func (g *Client) Hooks(ctx context.Context, scope HookScope) ([]Hook, error) {
	c, err := g.api(ctx)
	if err != nil {
		return nil, err
	}
	var (
		list []*sdk.Hook
		resp *sdk.Response
	)
	if scope.Org != "" {
		list, resp, err = c.ListOrgHooks(scope.Org, sdk.ListHooksOptions{ListOptions: sdk.ListOptions{PageSize: 50}})
	} else {
		owner, name, serr := splitRepo(scope.Repo)
		if serr != nil {
			return nil, serr
		}
		list, resp, err = c.ListRepoHooks(owner, name, sdk.ListHooksOptions{ListOptions: sdk.ListOptions{PageSize: 50}})
	}
	if err != nil {
		return nil, scopeErr("list webhooks of "+scope.String(), resp, err)
	}
	out := make([]Hook, 0, len(list))
	for _, h := range list {
		out = append(out, Hook{ID: h.ID, Type: h.Type, URL: h.Config["url"], ContentType: h.Config["content_type"],
			Events: h.Events, Active: h.Active})
	}
	return out, nil
}

// InstallHook creates the webhook that sends mozi's events (those the
// forge has) to url signed with secret. Gitea's API cannot change a hook's secret (an edit ignores
// it), so a hook already pointing at url is replaced: the new one is
// created first and the old one deleted after, so no event falls between
// (one sent by both is the same event twice, which mozi's intake drops).
// It returns the hook and the ids of the hooks it replaced.
func (g *Client) InstallHook(ctx context.Context, f Forge, scope HookScope, url, secret string) (Hook, []int64, error) {
	existing, err := g.Hooks(ctx, scope)
	if err != nil {
		return Hook{}, nil, err
	}
	c, err := g.api(ctx)
	if err != nil {
		return Hook{}, nil, err
	}
	config := map[string]string{"url": url, "content_type": "json", "secret": secret, "http_method": "post"}
	events := f.HookEvents()
	// Type gitea on a Forgejo too: it sends the same payloads there, with
	// its X-Forgejo-* headers beside X-Gitea-*.
	opt := sdk.CreateHookOption{Type: sdk.HookTypeGitea, Config: config, Events: events, Active: true, BranchFilter: "*"}
	var (
		created *sdk.Hook
		resp    *sdk.Response
	)
	owner, name, _ := splitRepo(scope.Repo)
	if scope.Org != "" {
		created, resp, err = c.CreateOrgHook(scope.Org, opt)
	} else {
		created, resp, err = c.CreateRepoHook(owner, name, opt)
	}
	if err != nil {
		return Hook{}, nil, scopeErr("create webhook on "+scope.String(), resp, err)
	}
	hook := Hook{ID: created.ID, Type: created.Type, URL: url, ContentType: "json", Events: created.Events, Active: true}
	var replaced []int64
	for _, h := range existing {
		if h.URL != url || h.ID == created.ID {
			continue
		}
		if scope.Org != "" {
			resp, err = c.DeleteOrgHook(scope.Org, h.ID)
		} else {
			resp, err = c.DeleteRepoHook(owner, name, h.ID)
		}
		if err != nil {
			return hook, replaced, scopeErr(fmt.Sprintf("delete webhook %d of %s (replaced by %d: both send now)", h.ID, scope, created.ID), resp, err)
		}
		replaced = append(replaced, h.ID)
	}
	return hook, replaced, nil
}

// scopeErr is apiErr that also recognises Gitea's missing-scope answer.
func scopeErr(what string, resp *sdk.Response, err error) error {
	if resp != nil && resp.StatusCode == http.StatusForbidden && strings.Contains(err.Error(), "scope") {
		return fmt.Errorf("%s: %w (%v)", what, ErrMissingScope, err)
	}
	return apiErr(what, resp, err)
}
