package gitea

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// actionsJobRE matches the path of a Gitea Actions status's target URL,
// {owner}/{repo}/actions/runs/{run}/jobs/{job}: Gitea 1.25 links a job
// there, by its id or, in older releases, by its index in the run.
var actionsJobRE = regexp.MustCompile(`^/([^/]+)/([^/]+)/actions/runs/(\d+)/jobs/(\d+)/?$`)

// ErrNotActionsJob says a status's target URL is no Gitea Actions job of
// the repository on this Gitea: there is no log to read (and mozi's token
// is never sent elsewhere).
var ErrNotActionsJob = errors.New("the status does not link a Gitea Actions job of this repository")

// maxLogLine caps one log line kept for a prompt.
const maxLogLine = 2 << 10

// JobLogTail returns the last lines of the log of the Gitea Actions job
// that a commit status's target URL links, through Gitea's API (GET
// /repos/{owner}/{repo}/actions/jobs/{job_id}/logs, which needs read
// access to the repository's Actions). A job linked by its index in the
// run is found through the run's jobs.
func (g *Client) JobLogTail(ctx context.Context, repo, targetURL string, lines int) (string, error) {
	run, job, err := g.actionsJob(repo, targetURL)
	if err != nil {
		return "", err
	}
	tail, err := g.jobLogTail(ctx, repo, job, lines)
	if Status(err) != http.StatusNotFound {
		return tail, err
	}
	id, ferr := g.jobByIndex(ctx, repo, run, job)
	if ferr != nil {
		return "", fmt.Errorf("%w (and as a job index: %v)", err, ferr)
	}
	return g.jobLogTail(ctx, repo, id, lines)
}

// actionsJob reads the run and job numbers of a target URL on this Gitea.
func (g *Client) actionsJob(repo, targetURL string) (run, job int64, err error) {
	u, err := url.Parse(targetURL)
	if err != nil || targetURL == "" {
		return 0, 0, ErrNotActionsJob
	}
	base, err := url.Parse(g.url)
	if err != nil {
		return 0, 0, fmt.Errorf("gitea url: %w", err)
	}
	if u.IsAbs() && !strings.EqualFold(u.Host, base.Host) {
		return 0, 0, ErrNotActionsJob
	}
	p, ok := strings.CutPrefix(u.Path, strings.TrimSuffix(base.Path, "/"))
	m := actionsJobRE.FindStringSubmatch(p)
	if !ok || m == nil || !strings.EqualFold(m[1]+"/"+m[2], repo) {
		return 0, 0, ErrNotActionsJob
	}
	run, _ = strconv.ParseInt(m[3], 10, 64)
	job, _ = strconv.ParseInt(m[4], 10, 64)
	return run, job, nil
}

// get asks Gitea's API for path with mozi's token.
func (g *Client) get(ctx context.Context, what, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/api/v1"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if g.token != "" {
		req.Header.Set("Authorization", "token "+g.token)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		drain(resp)
		err := fmt.Errorf("%s: Gitea answered %s", what, resp.Status)
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			err = fmt.Errorf("%s: Gitea answered %s: mozi's token cannot read the repository's Actions", what, resp.Status)
		}
		return nil, &statusError{status: resp.StatusCode, err: err}
	}
	return resp, nil
}

func (g *Client) jobLogTail(ctx context.Context, repo string, job int64, lines int) (string, error) {
	what := fmt.Sprintf("log of Actions job %d of %s", job, repo)
	resp, err := g.get(ctx, what, fmt.Sprintf("/repos/%s/actions/jobs/%d/logs", repo, job))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	tail, err := lastLines(resp.Body, lines)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return tail, nil
}

// jobByIndex is the id of the index-th job of a run.
func (g *Client) jobByIndex(ctx context.Context, repo string, run, index int64) (int64, error) {
	what := fmt.Sprintf("jobs of Actions run %d of %s", run, repo)
	resp, err := g.get(ctx, what, fmt.Sprintf("/repos/%s/actions/runs/%d/jobs", repo, run))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Jobs []struct {
			ID int64 `json:"id"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if index < 0 || index >= int64(len(list.Jobs)) {
		return 0, fmt.Errorf("%s: no job %d among %d", what, index, len(list.Jobs))
	}
	return list.Jobs[index].ID, nil
}

// lastLines keeps the last n lines of r, each cut to maxLogLine bytes.
func lastLines(r io.Reader, n int) (string, error) {
	if n <= 0 {
		n = 1
	}
	ring := make([]string, 0, n)
	next := 0
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			line = strings.TrimRight(line, "\r\n")
			if len(line) > maxLogLine {
				line = line[:maxLogLine] + "…"
			}
			if len(ring) < n {
				ring = append(ring, line)
			} else {
				ring[next] = line
				next = (next + 1) % n
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return strings.Join(append(ring[next:], ring[:next]...), "\n"), nil
}
