package realgitea

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository/gitea"
)

// APIError is a Gitea API answer other than 2xx.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, strings.TrimSpace(e.Body))
}

// Credentials authenticate an API call: a token, or a login and password.
type Credentials struct {
	Token    string
	Login    string
	Password string
}

// Token is the credentials of an API token.
func Token(t string) Credentials { return Credentials{Token: t} }

// Client calls a Gitea's API: the tests' own calls and those of the
// agents they run.
type Client struct {
	// URL is Gitea's base URL (no trailing slash).
	URL string
	// HTTP is the client used (nil: one with a 30 s timeout).
	HTTP *http.Client
}

// defaultHTTP waits long: a Gitea shared by parallel tests on a small
// machine may take most of a minute to merge.
var defaultHTTP = &http.Client{Timeout: 2 * time.Minute}

// Call sends a JSON API request (path below /api/v1) and decodes the
// answer into out (nil: discarded).
func (s Client) Call(ctx context.Context, as Credentials, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case as.Token != "":
		req.Header.Set("Authorization", "token "+as.Token)
	case as.Login != "":
		req.SetBasicAuth(as.Login, as.Password)
	}
	hc := s.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: string(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// admin is the administrator's credentials.
func (s *Server) admin() Credentials { return Token(s.AdminToken) }

// User is a Gitea account a test acts as.
type User struct {
	Login    string
	Password string
	Token    string // scope all
	ID       int64
}

// Credentials are the user's token.
func (u User) Credentials() Credentials { return Token(u.Token) }

// CreateUser makes a user with a password and an API token (scope all).
// admin makes it a site administrator.
func (s *Server) CreateUser(ctx context.Context, login string, admin bool) (User, error) {
	u := User{Login: login, Password: "pw-" + randomHex(8)}
	var created struct {
		ID int64 `json:"id"`
	}
	if err := s.Call(ctx, s.admin(), http.MethodPost, "/admin/users", map[string]any{
		"username": login, "email": login + "@example.test", "password": u.Password,
		"must_change_password": false, "visibility": "public",
	}, &created); err != nil {
		return User{}, fmt.Errorf("create user %s: %w", login, err)
	}
	u.ID = created.ID
	if admin {
		if err := s.Call(ctx, s.admin(), http.MethodPatch, "/admin/users/"+login, map[string]any{
			"login_name": login, "source_id": 0, "admin": true,
		}, nil); err != nil {
			return User{}, fmt.Errorf("make %s an admin: %w", login, err)
		}
	}
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	if err := s.Call(ctx, Credentials{Login: login, Password: u.Password}, http.MethodPost,
		"/users/"+login+"/tokens", map[string]any{"name": "tests-" + randomHex(4), "scopes": []string{"all"}}, &tok); err != nil {
		return User{}, fmt.Errorf("token of %s: %w", login, err)
	}
	u.Token = tok.SHA1
	return u, nil
}

// CreateRepo makes a public repository owned by the administrator (or by
// owner, an organization or user, when not empty) with a README on main,
// then commits files (path → content) to main in one commit. It returns
// owner/name.
func (s *Server) CreateRepo(ctx context.Context, owner, name string, files map[string]string) (string, error) {
	path := "/user/repos"
	if owner != "" && owner != AdminLogin {
		path = "/admin/users/" + owner + "/repos"
	}
	var repo struct {
		FullName string `json:"full_name"`
	}
	if err := s.Call(ctx, s.admin(), http.MethodPost, path, map[string]any{
		"name": name, "auto_init": true, "default_branch": "main", "readme": "Default", "private": false,
	}, &repo); err != nil {
		return "", fmt.Errorf("create repository %s: %w", name, err)
	}
	if len(files) > 0 {
		var ops []map[string]any
		for p, content := range files {
			ops = append(ops, map[string]any{"operation": "create", "path": p,
				"content": base64.StdEncoding.EncodeToString([]byte(content))})
		}
		if err := s.Call(ctx, s.admin(), http.MethodPost, "/repos/"+repo.FullName+"/contents", map[string]any{
			"branch": "main", "message": "Add test files", "files": ops,
		}, nil); err != nil {
			return "", fmt.Errorf("add files to %s: %w", repo.FullName, err)
		}
	}
	return repo.FullName, nil
}

// AddCollaborator gives a user write (or another permission) on a
// repository.
func (s *Server) AddCollaborator(ctx context.Context, repo, login, permission string) error {
	if permission == "" {
		permission = "write"
	}
	if err := s.Call(ctx, s.admin(), http.MethodPut, "/repos/"+repo+"/collaborators/"+login,
		map[string]any{"permission": permission}, nil); err != nil {
		return fmt.Errorf("add %s to %s: %w", login, repo, err)
	}
	return nil
}

// AddHook points a repository's webhook at hookURL, signed with secret,
// for the events `mozi webhook install` asks for.
func (s *Server) AddHook(ctx context.Context, repo, hookURL, secret string) (int64, error) {
	var hook struct {
		ID int64 `json:"id"`
	}
	if err := s.Call(ctx, s.admin(), http.MethodPost, "/repos/"+repo+"/hooks", map[string]any{
		"type": "gitea", "active": true, "events": gitea.HookEvents, "branch_filter": "*",
		"config": map[string]string{"url": hookURL, "content_type": "json", "secret": secret},
	}, &hook); err != nil {
		return 0, fmt.Errorf("add webhook to %s: %w", repo, err)
	}
	return hook.ID, nil
}

// CloneURL is the HTTP clone URL of owner/name.
func (s *Server) CloneURL(repo string) string { return s.URL + "/" + repo + ".git" }

// AuthCloneURL is the clone URL carrying a user's token, for test-side
// pushes (never give it to mozi).
func (s *Server) AuthCloneURL(repo string, u User) string {
	p, _ := url.Parse(s.CloneURL(repo))
	p.User = url.UserPassword(u.Login, u.Token)
	return p.String()
}
