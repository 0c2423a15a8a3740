package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/moziplus/mozi/repository"
	"github.com/moziplus/mozi/repository/task"
)

const (
	sessionCookie = "mozi_console"
	stateCookie   = "mozi_console_state"
)

// viewer is who asks: a signed-in user or, when the operator allows it,
// an anonymous reader.
type viewer struct {
	Login     string
	token     string
	CSRF      string
	key       string // the session's hash, hex: the access cache's key
	Anonymous bool
}

type viewerKey struct{}

func viewerOf(ctx context.Context) viewer { v, _ := ctx.Value(viewerKey{}).(viewer); return v }

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashID(id string) []byte { h := sha256.Sum256([]byte(id)); return h[:] }

// login sends the browser to Gitea's consent page with a fresh state,
// kept in a short-lived cookie to check on the way back.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	state := randomToken()
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state, Path: "/auth/callback", MaxAge: 600,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	q := url.Values{"client_id": {s.cfg.ClientID}, "redirect_uri": {s.redirectURI()},
		"response_type": {"code"}, "state": {state}}
	http.Redirect(w, r, s.cfg.BrowserGiteaURL+"/login/oauth/authorize?"+q.Encode(), http.StatusFound)
}

func (s *Server) redirectURI() string { return s.cfg.PublicURL + "/auth/callback" }

// callback completes the authorization-code flow: the code for a token,
// the token for the user, and a new session.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(stateCookie)
	state := r.URL.Query().Get("state")
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		http.Error(w, "sign-in failed: the state does not match (start again from /login)", http.StatusBadRequest)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Path: "/auth/callback", MaxAge: -1})
	if e := r.URL.Query().Get("error"); e != "" {
		http.Error(w, "sign-in refused by Gitea: "+e, http.StatusForbidden)
		return
	}
	token, lifetime, err := s.exchange(r.Context(), r.URL.Query().Get("code"))
	if err != nil {
		s.log.Warn("console sign-in failed", "error", err)
		http.Error(w, "sign-in failed: Gitea did not accept the code", http.StatusBadGateway)
		return
	}
	login, err := s.giteaUser(r.Context(), token)
	if err != nil {
		s.log.Warn("console sign-in failed", "error", err)
		http.Error(w, "sign-in failed: Gitea did not say who you are", http.StatusBadGateway)
		return
	}
	id := randomToken()
	h := hashID(id)
	// The session ends when the user's Gitea token does (Gitea's default
	// is an hour): without it mozi cannot ask what the user may read.
	ttl := s.cfg.SessionTTL
	if lifetime > 0 && lifetime < ttl {
		ttl = lifetime
	}
	sess := repository.ConsoleSession{Login: login, Token: sealToken(s.tokens, h, token), CSRF: randomToken(),
		ExpiresAt: time.Now().Add(ttl)}
	if err := s.store.CreateConsoleSession(r.Context(), h, sess); err != nil {
		s.fail(w, r, err)
		return
	}
	s.prune(r.Context())
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", Expires: sess.ExpiresAt,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	s.log.Info("console sign-in", "login", login)
	http.Redirect(w, r, "/", http.StatusFound)
}

// exchange trades an authorization code for the user's access token and
// its lifetime (0: not said).
func (s *Server) exchange(ctx context.Context, code string) (string, time.Duration, error) {
	if code == "" {
		return "", 0, errors.New("no code")
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {s.redirectURI()},
		"client_id": {s.cfg.ClientID}, "client_secret": {s.cfg.ClientSecret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.GiteaURL+"/login/oauth/access_token",
		strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := s.doJSON(req, &out); err != nil {
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	if out.AccessToken == "" {
		return "", 0, errors.New("token request: no access_token in the answer")
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

func (s *Server) giteaUser(ctx context.Context, token string) (string, error) {
	req, err := s.apiRequest(ctx, token, "/api/v1/user")
	if err != nil {
		return "", err
	}
	var u struct {
		Login string `json:"login"`
	}
	if err := s.doJSON(req, &u); err != nil {
		return "", fmt.Errorf("read the signed-in user: %w", err)
	}
	if u.Login == "" {
		return "", errors.New("read the signed-in user: no login")
	}
	return u.Login, nil
}

func (s *Server) apiRequest(ctx context.Context, token, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.GiteaURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// statusError is a non-2xx answer from Gitea.
type statusError struct {
	code int
	path string
}

func (e statusError) Error() string { return fmt.Sprintf("Gitea answered %d to %s", e.code, e.path) }

func (s *Server) doJSON(req *http.Request, out any) error {
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return statusError{code: resp.StatusCode, path: req.URL.Path}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("decode the answer to %s: %w", req.URL.Path, err)
	}
	return nil
}

// authenticate puts the viewer in the request's context, or refuses: a
// page sends the browser to sign in, a stream or an action gets 401.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := s.session(r)
		switch {
		case err == nil:
		case errors.Is(err, task.ErrNotFound) && s.cfg.AnonymousRead && r.Method == http.MethodGet:
			v = viewer{Anonymous: true}
		case errors.Is(err, task.ErrNotFound):
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/stream") {
				http.Redirect(w, r, "/login", http.StatusFound)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		default:
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

func (s *Server) session(r *http.Request) (viewer, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return viewer{}, fmt.Errorf("no session cookie: %w", task.ErrNotFound)
	}
	h := hashID(c.Value)
	sess, err := s.store.ConsoleSession(r.Context(), h)
	if err != nil {
		return viewer{}, err
	}
	token, err := openToken(s.tokens, h, sess.Token)
	if err != nil {
		// Sealed under another client secret (rotated) or before tokens
		// were sealed: the user signs in again, and the row goes now.
		s.log.Info("console session signed out: its token cannot be opened (client secret rotated?)", "login", sess.Login)
		if err := s.store.DeleteConsoleSession(r.Context(), h); err != nil {
			return viewer{}, err
		}
		return viewer{}, fmt.Errorf("console session: %w: %w", errUnsealable, task.ErrNotFound)
	}
	return viewer{Login: sess.Login, token: token, CSRF: sess.CSRF, key: fmt.Sprintf("%x", h)}, nil
}

// checkCSRF refuses a POST without the session's token.
func checkCSRF(w http.ResponseWriter, r *http.Request, v viewer) bool {
	got := r.PostFormValue("csrf")
	if v.Anonymous || v.CSRF == "" || subtle.ConstantTimeCompare([]byte(got), []byte(v.CSRF)) != 1 {
		http.Error(w, "refused: the form's CSRF token is missing or wrong (reload the page)", http.StatusForbidden)
		return false
	}
	return true
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r.Context())
	if !checkCSRF(w, r, v) {
		return
	}
	c, _ := r.Cookie(sessionCookie)
	if err := s.store.DeleteConsoleSession(r.Context(), hashID(c.Value)); err != nil {
		s.fail(w, r, err)
		return
	}
	s.prune(r.Context())
	s.access.forget(v.key)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// fail answers 500 for an error of mozi's, logged once with its request;
// a token Gitea refuses sends the user to sign in again.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errSignedOut) {
		if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/stream") {
			http.Redirect(w, r, "/login", http.StatusFound)
			return
		}
		http.Error(w, "sign in again", http.StatusUnauthorized)
		return
	}
	s.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	http.Error(w, "internal error", http.StatusInternalServerError)
}
