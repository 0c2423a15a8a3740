// Package engine is a small client of the Docker Engine API over a unix
// socket: what mozi's container backend needs of Docker or of podman's
// API service (which speaks the same API), and nothing more. It talks
// HTTP through net/http and reads JSON; it never runs or parses a CLI.
//
// Every call negotiates the API version once per client (GET /version)
// and then uses a versioned path, so a field's meaning cannot change
// under mozi when the engine is upgraded. An engine that does not answer
// gives an error wrapping ErrUnreachable; an engine that answers with an
// error gives an *Error carrying its message.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// The API versions this client speaks. 1.41 is Docker 20.10's and what
// podman 4 and 5 announce; Docker 29 refuses anything older than 1.44, so
// the client goes as high as the engine and MaxVersion allow.
const (
	MinVersion = "1.41"
	MaxVersion = "1.47"
)

// ErrUnreachable: the engine did not answer (no socket, refused, cut).
var ErrUnreachable = errors.New("container engine unreachable")

// Error is an error the engine answered with.
type Error struct {
	Op      string // what was asked ("create container")
	Status  int    // the HTTP status
	Message string // the engine's own message
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (engine said HTTP %d)", e.Op, e.Message, e.Status)
}

// IsNotFound reports whether err is the engine saying that what was named
// does not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Client talks to one engine.
type Client struct {
	socket string
	http   *http.Client

	mu      sync.Mutex
	version string // negotiated, "" until then
}

// New returns a client of the engine listening on the unix socket at
// path. It does not connect yet.
func New(socket string) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	return &Client{
		socket: socket,
		// No overall timeout: a wait lasts as long as the run. Every
		// call is bounded by its context instead.
		http: &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConns: 8, IdleConnTimeout: 0}},
	}
}

// Socket is the socket the client talks to.
func (c *Client) Socket() string { return c.socket }

// Ping checks that the engine answers, and negotiates the API version
// when that is not done yet.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.apiVersion(ctx)
	return err
}

// apiVersion is the negotiated version's path prefix ("/v1.41"). It
// comes from the Api-Version header of GET /_ping, which Docker and
// podman both send (podman's GET /version runs its runtime's and
// helpers' binaries and takes seconds).
func (c *Client) apiVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	resp, err := c.send(ctx, "ping the engine", http.MethodGet, "/_ping", nil, nil, "")
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	use, err := negotiate(resp.Header.Get("Api-Version"), "")
	if err != nil {
		return "", fmt.Errorf("engine at %s: %w", c.socket, err)
	}
	c.version = "/v" + use
	return c.version, nil
}

// negotiate picks the newest version both sides speak.
func negotiate(engineMax, engineMin string) (string, error) {
	if engineMax == "" {
		return "", errors.New("the engine does not say its API version")
	}
	use := engineMax
	if compareVersions(use, MaxVersion) > 0 {
		use = MaxVersion
	}
	if compareVersions(use, MinVersion) < 0 {
		return "", fmt.Errorf("engine API %s is older than %s, the oldest mozi speaks", engineMax, MinVersion)
	}
	if engineMin != "" && compareVersions(use, engineMin) < 0 {
		return "", fmt.Errorf("engine API needs at least %s, newer than %s, the newest mozi speaks", engineMin, MaxVersion)
	}
	return use, nil
}

// compareVersions compares "major.minor" versions.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// call sends a request on the negotiated version and decodes a JSON
// answer into out (nil: none wanted).
func (c *Client) call(ctx context.Context, op, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: encode: %w", op, err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.versioned(ctx, op, method, path, q, body, ctype)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s: decode the engine's answer: %w", op, err)
	}
	return nil
}

// versioned sends a request under the negotiated version's prefix.
func (c *Client) versioned(ctx context.Context, op, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	prefix, err := c.apiVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return c.send(ctx, op, method, prefix+path, q, body, ctype)
}

// send sends one request; a status of 400 or more becomes an *Error.
func (c *Client) send(ctx context.Context, op, method, path string, q url.Values, body io.Reader, ctype string) (*http.Response, error) {
	u := "http://engine" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		return nil, fmt.Errorf("%s: %w at %s: %w", op, ErrUnreachable, c.socket, unwrapURL(err))
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, apiError(op, resp)
	}
	return resp, nil
}

// apiError reads the engine's {"message": …} answer.
func apiError(op string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &m) == nil && m.Message != "" {
		msg = m.Message
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	// One line: the engine's messages sometimes end in a newline or
	// carry a runtime's multi-line output.
	msg = strings.Join(strings.Fields(msg), " ")
	return &Error{Op: op, Status: resp.StatusCode, Message: msg}
}

// unwrapURL drops net/http's "Post \"http://engine/…\":" wrapping, which
// names a host that does not exist.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
