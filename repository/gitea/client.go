package gitea

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/moziplus/mozi/repository/task"
)

// Defaults of Config.
const (
	DefaultTimeout       = 15 * time.Second
	DefaultMaxAttempts   = 4
	DefaultRatePerSecond = 10
	DefaultBurst         = 20
)

// Config configures mozi's Gitea API access.
type Config struct {
	URL   string
	Token string
	// Timeout bounds each attempt (default DefaultTimeout, 15s).
	Timeout time.Duration
	// MaxAttempts per call, the first included (default DefaultMaxAttempts, 4).
	MaxAttempts int
	// RatePerSecond and Burst limit mozi's calls (defaults
	// DefaultRatePerSecond and DefaultBurst, 10 and 20).
	RatePerSecond float64
	Burst         int
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
	// Transport is the underlying HTTP transport (default: a clone of
	// http.DefaultTransport); tests inject fakes.
	Transport http.RoundTripper
	// OnRecovered is called (in its own goroutine) when Gitea answers
	// again after an outage: what waited for it may go on at once.
	OnRecovered func()
}

// Client is mozi's client of the Gitea API: one long-lived HTTP client with
// its connection pool, rate limit, retries and metrics. The SDK keeps one
// context per client, so each call gets a thin SDK client carrying the
// call's context over the shared HTTP client; the SDK's version probe is
// skipped (no request at creation).
type Client struct {
	url   string
	token string
	http  *http.Client
	tr    *transport
}

// New builds the client. It makes no request.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("gitea: no URL configured (gitea.url or MOZI_GITEA_URL)")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = DefaultBurst
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	next := cfg.Transport
	if next == nil {
		next = http.DefaultTransport.(*http.Transport).Clone()
	}
	tr := &transport{
		next: next, limiter: rate.NewLimiter(rate.Limit(cfg.RatePerSecond), cfg.Burst),
		timeout: cfg.Timeout, maxAttempts: cfg.MaxAttempts, backoffBase: 500 * time.Millisecond,
		backoffMax: 30 * time.Second, logger: cfg.Logger, metrics: newMetrics(cfg.Registerer),
		sleep: sleepCtx, onRecovered: cfg.OnRecovered,
	}
	return &Client{url: strings.TrimSuffix(cfg.URL, "/"), token: cfg.Token,
		http: &http.Client{Transport: tr}, tr: tr}, nil
}

// Down reports whether Gitea's last answer was no answer (an outage).
func (g *Client) Down() bool {
	g.tr.mu.Lock()
	defer g.tr.mu.Unlock()
	return !g.tr.downSince.IsZero()
}

// DefaultProbeEvery is how often WatchOutages asks Gitea during an outage.
const DefaultProbeEvery = 2 * time.Second

// WatchOutages asks Gitea its version every probe interval while it is
// down, until ctx ends: the outage's end is noticed (and OnRecovered
// called) within seconds, not at the next call some job happens to make.
func (g *Client) WatchOutages(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultProbeEvery
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if g.Down() {
			probe, cancel := context.WithTimeout(ctx, every)
			_, _ = g.ServerVersion(probe)
			cancel()
		}
	}
}

// URL is Gitea's base URL.
func (g *Client) URL() string { return g.url }

func (g *Client) api(ctx context.Context) (*sdk.Client, error) {
	return g.client(ctx, g.token)
}

// client is an SDK client with token ("" asks anonymously).
func (g *Client) client(ctx context.Context, token string) (*sdk.Client, error) {
	c, err := sdk.NewClient(g.url, sdk.SetHTTPClient(g.http), sdk.SetToken(token),
		sdk.SetGiteaVersion(""), sdk.SetContext(ctx), sdk.SetUserAgent("mozi"))
	if err != nil {
		return nil, fmt.Errorf("gitea client: %w", err)
	}
	return c, nil
}

// begin prepares a call about repo: its SDK client and the repository's
// owner and name.
func (g *Client) begin(ctx context.Context, repo string) (*sdk.Client, string, string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, "", "", err
	}
	c, err := g.api(ctx)
	return c, owner, name, err
}

func splitRepo(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// apiErr wraps an SDK error with what was asked, mapping 404 to
// task.ErrNotFound.
func apiErr(what string, resp *sdk.Response, err error) error {
	switch {
	case resp != nil && resp.StatusCode == http.StatusNotFound:
		err = fmt.Errorf("%s: %w in Gitea", what, task.ErrNotFound)
	case resp != nil && resp.StatusCode == http.StatusUnauthorized:
		err = fmt.Errorf("%s: %w", what, ErrUnauthorized)
	default:
		err = fmt.Errorf("%s: %w", what, err)
	}
	if resp != nil {
		return &statusError{status: resp.StatusCode, err: err}
	}
	return err
}

// statusError is an error Gitea answered with an HTTP status.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// Status is the HTTP status Gitea answered a failed call with (0: no
// answer: a timeout, a refused connection).
func Status(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return 0
}

// Refused reports whether Gitea refused a call for good: a 4xx other than
// a refused token (an operator fixes that), a timeout or a rate limit.
// Trying the same call again cannot help.
func Refused(err error) bool {
	if errors.Is(err, ErrUnauthorized) {
		return false
	}
	switch s := Status(err); {
	case s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
		return false
	case s >= 400 && s < 500:
		return true
	}
	return false
}

// ErrUnauthorized is Gitea's 401: the token is wrong, expired or revoked.
var ErrUnauthorized = errors.New("the token was refused (401): it is wrong, expired or revoked")

// FetchIssue reads an issue (or a pull request's issue side) from Gitea.
func (g *Client) FetchIssue(ctx context.Context, repo string, number int) (task.Issue, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return task.Issue{}, err
	}
	gi, resp, err := c.GetIssue(owner, name, int64(number))
	if err != nil {
		return task.Issue{}, apiErr(fmt.Sprintf("get issue %s#%d", repo, number), resp, err)
	}
	return issueFromSDK(repo, gi), nil
}

func issueFromSDK(repo string, gi *sdk.Issue) task.Issue {
	i := task.Issue{Repo: repo, Number: int(gi.Index), Title: gi.Title, Body: task.CapBody(gi.Body),
		State: string(gi.State), IsPull: gi.PullRequest != nil,
		CreatedAt: gi.Created.UTC(), UpdatedAt: gi.Updated.UTC()}
	if gi.Poster != nil {
		i.Author = gi.Poster.UserName
	}
	if gi.Closed != nil {
		i.ClosedAt = gi.Closed.UTC()
	}
	for _, l := range gi.Labels {
		i.Labels = append(i.Labels, l.Name)
	}
	for _, a := range gi.Assignees {
		i.Assignees = append(i.Assignees, a.UserName)
	}
	if i.State != "closed" {
		i.State = "open"
	}
	return i
}

// FetchComments reads an issue's comments, oldest first, up to limit.
// Gitea 1.25 does not page this list (every page is the whole list): a
// page that brings no comment not seen yet is the end.
func (g *Client) FetchComments(ctx context.Context, repo string, number, limit int) ([]task.Comment, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	var out []task.Comment
	seen := map[int64]bool{}
	for page := 1; len(out) < limit; page++ {
		list, resp, err := c.ListIssueComments(owner, name, int64(number), sdk.ListIssueCommentOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, apiErr(fmt.Sprintf("list comments of %s#%d", repo, number), resp, err)
		}
		fresh := 0
		for _, gc := range list {
			if seen[gc.ID] {
				continue
			}
			seen[gc.ID], fresh = true, fresh+1
			cm := task.Comment{ID: gc.ID, Body: gc.Body, CreatedAt: gc.Created.UTC()}
			if gc.Poster != nil {
				cm.Author = gc.Poster.UserName
			}
			out = append(out, cm)
		}
		if len(list) < 50 || fresh == 0 {
			break
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// FetchBlockedBy lists the issues Gitea's native dependencies say block
// this one.
func (g *Client) FetchBlockedBy(ctx context.Context, repo string, number int) ([]int, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	deps, resp, err := c.ListIssueDependencies(owner, name, int64(number), sdk.ListIssueDependenciesOptions{
		ListOptions: sdk.ListOptions{PageSize: 50}})
	if err != nil {
		return nil, apiErr(fmt.Sprintf("list dependencies of %s#%d", repo, number), resp, err)
	}
	var out []int
	for _, d := range deps {
		if d.Repository == nil || d.Repository.Owner+"/"+d.Repository.Name == repo || d.Repository.FullName == repo {
			out = append(out, int(d.Index))
		}
	}
	return out, nil
}

// PostComment comments on an issue and returns the comment's id.
func (g *Client) PostComment(ctx context.Context, repo string, number int, body string) (int64, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return 0, err
	}
	cm, resp, err := c.CreateIssueComment(owner, name, int64(number), sdk.CreateIssueCommentOption{Body: body})
	if err != nil {
		return 0, apiErr(fmt.Sprintf("comment on %s#%d", repo, number), resp, err)
	}
	return cm.ID, nil
}

// FetchPullRequest reads a pull request from Gitea.
func (g *Client) FetchPullRequest(ctx context.Context, repo string, number int) (task.PullRequest, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return task.PullRequest{}, err
	}
	pr, resp, err := c.GetPullRequest(owner, name, int64(number))
	if err != nil {
		return task.PullRequest{}, apiErr(fmt.Sprintf("get pull request %s#%d", repo, number), resp, err)
	}
	return pullFromSDK(repo, pr), nil
}

func pullFromSDK(repo string, pr *sdk.PullRequest) task.PullRequest {
	out := task.PullRequest{Repo: repo, Number: int(pr.Index), Title: pr.Title, Body: pr.Body, State: string(pr.State),
		Merged: pr.HasMerged}
	for _, u := range pr.RequestedReviewers {
		if u != nil {
			out.RequestedReviewers = append(out.RequestedReviewers, u.UserName)
		}
	}
	if pr.Poster != nil {
		out.Author = pr.Poster.UserName
	}
	if pr.MergedBy != nil {
		out.MergedBy = pr.MergedBy.UserName
	}
	if pr.Head != nil {
		out.HeadRef, out.HeadSHA = pr.Head.Ref, pr.Head.Sha
	}
	if pr.Base != nil {
		out.BaseRef = pr.Base.Ref
	}
	if pr.Updated != nil {
		out.UpdatedAt = pr.Updated.UTC()
	}
	if pr.Closed != nil {
		out.ClosedAt = pr.Closed.UTC()
	}
	return out
}

// FetchStatuses reads the latest status of each context of a commit.
func (g *Client) FetchStatuses(ctx context.Context, repo, sha string) ([]task.CommitStatus, error) {
	c, owner, name, err := g.begin(ctx, repo)
	if err != nil {
		return nil, err
	}
	combined, resp, err := c.GetCombinedStatus(owner, name, sha)
	if err != nil {
		return nil, apiErr(fmt.Sprintf("get statuses of %s@%s", repo, sha), resp, err)
	}
	out := make([]task.CommitStatus, 0, len(combined.Statuses))
	for _, s := range combined.Statuses {
		out = append(out, task.CommitStatus{Repo: repo, ID: s.ID, SHA: sha, Context: s.Context, State: string(s.State),
			TargetURL: s.TargetURL, Description: s.Description, UpdatedAt: s.Updated.UTC()})
	}
	return out, nil
}
