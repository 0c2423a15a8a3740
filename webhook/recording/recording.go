// Package recording loads recorded Gitea (or Forgejo) deliveries (a body
// NAME.json and its headers NAME.headers.json, as in testdata/gitea-1.25)
// and turns them into requests: for mozi replay, and for tests of
// everything behind the intake.
package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Fixture is one recorded delivery: its headers and byte-exact body.
type Fixture struct {
	Name    string // e.g. 019-pull_request-pull_request-opened
	Headers map[string]string
	Body    []byte
}

// Dir is the recorded Gitea 1.25 deliveries' directory in this repository.
func Dir() string { return DirOf("gitea-1.25") }

// DirOf is the directory of the deliveries recorded from another server,
// testdata/<name>/webhooks: gitea-1.25, gitea-1.27.3, forgejo-10.0.0-dev.
func DirOf(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", name, "webhooks")
}

// APIDir is the recorded Gitea 1.25 API responses' directory.
func APIDir() string { return filepath.Join(filepath.Dir(Dir()), "api") }

// LoadDir reads every NAME.json with its NAME.headers.json, in name
// (delivery) order.
func LoadDir(dir string) ([]Fixture, error) {
	bodies, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(bodies)
	var out []Fixture
	for _, path := range bodies {
		if strings.HasSuffix(path, ".headers.json") {
			continue
		}
		f, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no recorded deliveries in %s", dir)
	}
	return out, nil
}

// LoadFile reads one recorded delivery (NAME.json and NAME.headers.json).
func LoadFile(path string) (Fixture, error) {
	// Either file of the pair names the delivery.
	path = strings.TrimSuffix(path, ".headers.json")
	if !strings.HasSuffix(path, ".json") {
		path += ".json"
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return Fixture{}, err
	}
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	f := Fixture{Name: name, Body: body, Headers: map[string]string{}}
	raw, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".headers.json")
	if err != nil {
		return Fixture{}, fmt.Errorf("headers of %s: %w", name, err)
	}
	if err := json.Unmarshal(raw, &f.Headers); err != nil {
		return Fixture{}, fmt.Errorf("headers of %s: %w", name, err)
	}
	return f, nil
}

// MustLoad loads the repository's recorded deliveries or panics.
func MustLoad() []Fixture {
	fs, err := LoadDir(Dir())
	if err != nil {
		panic(err)
	}
	return fs
}

// Header returns a recorded header.
func (f Fixture) Header(name string) string { return f.Headers[name] }

// HTTPHeader is the recorded headers as a request carries them (read them
// with payload.ReadHeaders: a Forgejo's may have no X-Gitea-* header).
func (f Fixture) HTTPHeader() http.Header {
	h := http.Header{}
	for k, v := range f.Headers {
		h.Set(k, v)
	}
	return h
}

// Request builds the recorded POST to url, with every recorded header but
// those the transport sets itself. override replaces or (with "") removes
// headers.
func (f Fixture) Request(url string, override map[string]string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(f.Body))
	if err != nil {
		return nil, err
	}
	for k, v := range f.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length", "Accept-Encoding":
			continue
		}
		req.Header.Set(k, v)
	}
	for k, v := range override {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// WithDelivery returns override headers giving the fixture a new delivery id
// in every spelling, as Gitea's (or Forgejo's) Replay does.
func WithDelivery(id string) map[string]string {
	return map[string]string{"X-Gitea-Delivery": id, "X-Forgejo-Delivery": id, "X-Gogs-Delivery": id, "X-GitHub-Delivery": id}
}

// KeepHeaders returns a copy of the delivery with only the headers whose
// name starts with one of prefixes (and its Content-Type): a Forgejo that
// sends X-Forgejo-* alone.
func (f Fixture) KeepHeaders(prefixes ...string) Fixture {
	out := Fixture{Name: f.Name, Body: f.Body, Headers: map[string]string{}}
	for k, v := range f.Headers {
		keep := http.CanonicalHeaderKey(k) == "Content-Type"
		for _, p := range prefixes {
			keep = keep || strings.HasPrefix(http.CanonicalHeaderKey(k), http.CanonicalHeaderKey(p))
		}
		if keep {
			out.Headers[k] = v
		}
	}
	return out
}

// Edit returns a copy of the delivery with its JSON body changed by change
// (and the recorded signatures dropped: sign the new body).
func (f Fixture) Edit(change func(payload map[string]any)) (Fixture, error) {
	var p map[string]any
	if err := json.Unmarshal(f.Body, &p); err != nil {
		return Fixture{}, fmt.Errorf("edit %s: %w", f.Name, err)
	}
	change(p)
	body, err := json.Marshal(p)
	if err != nil {
		return Fixture{}, fmt.Errorf("edit %s: %w", f.Name, err)
	}
	out := Fixture{Name: f.Name + "-edited", Body: body, Headers: map[string]string{}}
	for k, v := range f.Headers {
		switch http.CanonicalHeaderKey(k) {
		case "X-Gitea-Signature", "X-Forgejo-Signature", "X-Gogs-Signature", "X-Hub-Signature", "X-Hub-Signature-256":
			continue
		}
		out.Headers[k] = v
	}
	return out, nil
}

// Find returns the recorded delivery whose name starts with prefix
// ("019"), or panics.
func Find(fixtures []Fixture, prefix string) Fixture {
	for _, f := range fixtures {
		if strings.HasPrefix(f.Name, prefix) {
			return f
		}
	}
	panic("no recorded delivery " + prefix)
}
