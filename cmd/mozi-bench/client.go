package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// rawClient is the load generator's HTTP/1.1 client: one keep-alive
// connection, requests pre-serialised with only the delivery id filled in
// per request. It costs a fraction of net/http's client, so the machine's
// CPU goes to what is measured: mozi and PostgreSQL.
type rawClient struct {
	conn   net.Conn
	r      *bufio.Reader
	prefix []byte // request line and headers up to the delivery id's value
	suffix []byte // the rest of the headers and the body
	buf    bytes.Buffer
}

func dialRawClient(target string, headers map[string]string, body []byte) (*rawClient, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var prefix, suffix bytes.Buffer
	fmt.Fprintf(&prefix, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	names := make([]string, 0, len(headers))
	for k := range headers {
		switch strings.ToLower(k) {
		case "host", "content-length", "accept-encoding", "x-gitea-delivery", "x-gogs-delivery", "x-github-delivery":
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&prefix, "%s: %s\r\n", k, headers[k])
	}
	fmt.Fprintf(&prefix, "Content-Length: %d\r\nX-Gitea-Delivery: ", len(body))
	suffix.WriteString("\r\n\r\n")
	suffix.Write(body)
	return &rawClient{conn: conn, r: bufio.NewReader(conn), prefix: prefix.Bytes(), suffix: suffix.Bytes()}, nil
}

// post sends one delivery and returns the response status.
func (c *rawClient) post(delivery string) (int, error) {
	c.buf.Reset()
	c.buf.Write(c.prefix)
	c.buf.WriteString(delivery)
	c.buf.Write(c.suffix)
	if _, err := c.conn.Write(c.buf.Bytes()); err != nil {
		return 0, err
	}
	status, err := c.r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(status)
	if len(fields) < 2 {
		return 0, fmt.Errorf("bad status line %q", status)
	}
	code, err := strconv.Atoi(fields[1])
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", status)
	}
	length := -1
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if name, value, ok := strings.Cut(line, ":"); ok && strings.EqualFold(name, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(value))
		}
	}
	if length < 0 {
		return 0, fmt.Errorf("response without Content-Length")
	}
	_, err = c.r.Discard(length)
	return code, err
}

func (c *rawClient) close() { c.conn.Close() }

// rawClientPool hands each goroutine its own connection.
type rawClientPool struct {
	free chan *rawClient
	dial func() (*rawClient, error)
}

func newRawClientPool(size int, dial func() (*rawClient, error)) *rawClientPool {
	return &rawClientPool{free: make(chan *rawClient, size), dial: dial}
}

func (p *rawClientPool) post(delivery string) error {
	var c *rawClient
	select {
	case c = <-p.free:
	default:
		var err error
		if c, err = p.dial(); err != nil {
			return err
		}
	}
	code, err := c.post(delivery)
	if err != nil {
		c.close()
		return err
	}
	select {
	case p.free <- c:
	default:
		c.close()
	}
	if code != 202 {
		return fmt.Errorf("status %d", code)
	}
	return nil
}

func (p *rawClientPool) close() {
	for {
		select {
		case c := <-p.free:
			c.close()
		default:
			return
		}
	}
}
