package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// errSignedOut means Gitea no longer accepts the user's token (revoked
// or expired): the user must sign in again.
var errSignedOut = errors.New("the user's token is no longer accepted by Gitea")

// perm is what a user may do in a repository, as Gitea says.
type perm struct {
	Read, Write bool
}

// accessCache keeps Gitea's answers per session and repository for a
// short time, so a page does not ask Gitea once per row and a revoked
// permission is honoured within the TTL.
type accessCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]cachedPerm
}

type cachedPerm struct {
	p       perm
	expires time.Time
}

func newAccessCache(ttl time.Duration) *accessCache {
	return &accessCache{ttl: ttl, m: map[string]cachedPerm{}}
}

func (c *accessCache) get(key string) (perm, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || time.Now().After(e.expires) {
		return perm{}, false
	}
	return e.p, true
}

func (c *accessCache) put(key string, p perm) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.m) > 10000 { // expired entries go when the map grows
		for k, e := range c.m {
			if now.After(e.expires) {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = cachedPerm{p: p, expires: now.Add(c.ttl)}
}

func (c *accessCache) forget(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if strings.HasPrefix(k, session+" ") {
			delete(c.m, k)
		}
	}
}

// permission asks Gitea, with the viewer's own token, what the viewer may
// do in repo. An anonymous reader (allowed by the operator) reads all and
// writes nothing.
func (s *Server) permission(ctx context.Context, v viewer, repo string) (perm, error) {
	if v.Anonymous {
		return perm{Read: true}, nil
	}
	key := v.key + " " + repo
	if p, ok := s.access.get(key); ok {
		return p, nil
	}
	req, err := s.apiRequest(ctx, v.token, "/api/v1/repos/"+repo)
	if err != nil {
		return perm{}, err
	}
	var out struct {
		Permissions struct {
			Admin bool `json:"admin"`
			Push  bool `json:"push"`
			Pull  bool `json:"pull"`
		} `json:"permissions"`
	}
	var p perm
	err = s.doJSON(req, &out)
	var se statusError
	switch {
	case err == nil:
		p = perm{Read: out.Permissions.Pull || out.Permissions.Push || out.Permissions.Admin,
			Write: out.Permissions.Push || out.Permissions.Admin}
	case errors.As(err, &se) && (se.code == http.StatusNotFound || se.code == http.StatusForbidden):
		// Gitea hides a private repository from who cannot read it.
	case errors.As(err, &se) && se.code == http.StatusUnauthorized:
		return perm{}, errSignedOut
	default:
		return perm{}, fmt.Errorf("ask Gitea about %s for %s: %w", repo, v.Login, err)
	}
	s.access.put(key, p)
	return p, nil
}

// readable filters repos down to those the viewer can read, asking Gitea
// about the repositories not in the cache a few at a time, so a user's
// first page over many repositories costs a few round trips, not one each.
func (s *Server) readable(ctx context.Context, v viewer, repos []string) ([]string, error) {
	perms := make([]perm, len(repos))
	errs := make([]error, len(repos))
	slots := make(chan struct{}, accessLookups)
	var wg sync.WaitGroup
	for i, r := range repos {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			perms[i], errs[i] = s.permission(ctx, v, r)
		}()
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if errors.Is(err, errSignedOut) {
			return nil, errSignedOut
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	out := make([]string, 0, len(repos))
	for i, r := range repos {
		if perms[i].Read {
			out = append(out, r)
		}
	}
	return out, nil
}

// accessLookups is how many permission questions one page asks Gitea at
// once.
const accessLookups = 8
