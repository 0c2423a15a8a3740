package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Stream is an attached container's multiplexed output and, when asked
// for, its stdin.
type Stream struct {
	conn *net.UnixConn
	r    *bufio.Reader
}

// Attach attaches to a container's stdout and stderr (and stdin when
// stdin is true). Attach before the start: what the process writes
// before anyone attached is not sent. The connection is taken over from
// HTTP (the API's "hijack"), so it is dialled here, not pooled.
func (c *Client) Attach(ctx context.Context, id string, stdin bool) (*Stream, error) {
	op := "attach to container " + short(id)
	prefix, err := c.apiVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, fmt.Errorf("%s: %w at %s: %w", op, ErrUnreachable, c.socket, err)
	}
	uc := conn.(*net.UnixConn)
	ok := false
	defer func() {
		if !ok {
			uc.Close()
		}
	}()
	// The handshake is bounded by ctx; the stream after it is not.
	stop := context.AfterFunc(ctx, func() { _ = uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	q := url.Values{"stream": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	if stdin {
		q.Set("stdin", "1")
	}
	req, err := http.NewRequest(http.MethodPost, "http://engine"+prefix+"/containers/"+id+"/attach?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(uc); err != nil {
		return nil, fmt.Errorf("%s: %w at %s: %w", op, ErrUnreachable, c.socket, err)
	}
	r := bufio.NewReader(uc)
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		return nil, fmt.Errorf("%s: %w at %s: %w", op, ErrUnreachable, c.socket, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, apiError(op, resp)
	}
	// 101 Switching Protocols; engines of old answered 200 and then
	// streamed all the same.
	if !stop() {
		return nil, fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	ok = true
	return &Stream{conn: uc, r: r}, nil
}

// Read reads the raw multiplexed stream (see Demux).
func (s *Stream) Read(p []byte) (int, error) { return s.r.Read(p) }

// Write writes to the process's stdin.
func (s *Stream) Write(p []byte) (int, error) { return s.conn.Write(p) }

// CloseStdin ends the process's stdin (a container created with
// StdinOnce then sees its end).
func (s *Stream) CloseStdin() error { return s.conn.CloseWrite() }

// Close ends the attachment.
func (s *Stream) Close() error { return s.conn.Close() }

var _ io.ReadWriteCloser = (*Stream)(nil)
