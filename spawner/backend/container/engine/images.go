package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ImageInfo is what an image inspect says (the fields mozi reads).
type ImageInfo struct {
	ID     string `json:"Id"`
	Config struct {
		Env        []string `json:"Env"`
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		User       string   `json:"User"`
		WorkingDir string   `json:"WorkingDir"`
	} `json:"Config"`
}

// InspectImage describes an image the engine holds; IsNotFound(err) when
// it holds none of that name.
func (c *Client) InspectImage(ctx context.Context, name string) (ImageInfo, error) {
	var out ImageInfo
	err := c.call(ctx, "inspect image "+strconv.Quote(name), http.MethodGet, "/images/"+name+"/json", nil, nil, &out)
	return out, err
}

// BuildImage builds an image tagged tag from a build context: a tar
// stream holding a Dockerfile at its top. It returns once the build
// ended; a failed step is an error carrying the builder's message.
func (c *Client) BuildImage(ctx context.Context, tag string, context io.Reader) error {
	op := "build image " + strconv.Quote(tag)
	resp, err := c.versioned(ctx, op, http.MethodPost, "/build", url.Values{"t": {tag}, "rm": {"1"}, "forcerm": {"1"}},
		context, "application/x-tar")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readProgress(op, resp.Body)
}

// readProgress reads a stream of JSON progress messages; a message with
// an error ends it with that error.
func readProgress(op string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var last string
	for sc.Scan() {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			m.Error = m.ErrorDetail.Message
		}
		if m.Error != "" {
			return fmt.Errorf("%s: %s", op, strings.Join(strings.Fields(m.Error), " "))
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			last = s
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: read the engine's progress (last: %q): %w", op, last, err)
	}
	return nil
}
