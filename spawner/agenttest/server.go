// Package agenttest drives real agent CLIs in tests: a scripted fake model
// endpoint on 127.0.0.1 that speaks the Anthropic Messages and OpenAI
// Responses streaming APIs, the environment and configuration files each CLI
// needs to talk to it and to nothing else, and a bubblewrap command line like
// the one mozi runs agents in. It is a test helper: no production code uses
// it.
//
// The script is always the same two model turns: first one tool call that
// runs a shell command writing a given file in the agent's working directory,
// then, once the tool's result comes back, a final text answer. Each turn
// reports known token usage, so a test can assert exact totals. A command
// that codex reports still running gets polls in between, which report no
// usage.
package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Usage is what one model turn reports. Input excludes cached tokens, as
// Anthropic counts them; on the OpenAI wire input_tokens is Input+CacheRead.
type Usage struct {
	Input      int64
	CacheRead  int64
	CacheWrite int64
	Output     int64
}

// In is every input token of the turn, as mozi counts them.
func (u Usage) In() int64 { return u.Input + u.CacheRead + u.CacheWrite }

// Script is what the fake model does in every conversation it is asked.
type Script struct {
	// File is written, relative to the agent's working directory, with
	// Content by the shell command of the first turn.
	File    string
	Content string
	// Answer is the final turn's text.
	Answer string
	// Tool and Final are the usage the two turns report.
	Tool  Usage
	Final Usage
	// HoldFinal keeps the final turn back until the client goes away, so a
	// run that a budget must kill cannot finish first.
	HoldFinal bool
	// Then is more shell the tool turn runs after writing the file (a
	// commit and a push, say); empty for none.
	Then string
	// Limit, when set, refuses the first model requests with the
	// provider's usage-limit answer.
	Limit *Limit
	// Subscription signs Claude Code in with a subscription's OAuth token
	// (FakeOAuthToken) instead of an API key: only then does it read the
	// usage-limit headers and report the reset.
	Subscription bool
	// OpencodeOpenAI points opencode at the server through the AI SDK's
	// OpenAI provider (the Responses API) instead of its Anthropic one, so
	// that it meets OpenAI's answers (Limit's usage_limit_reached).
	OpencodeOpenAI bool
}

// Turns the server tells apart.
const (
	TurnTool  = "tool"  // the first turn: a tool call
	TurnFinal = "final" // a tool result came back: the answer
	TurnPoll  = "poll"  // the tool's command still runs: wait for it (codex), reporting no usage
	TurnAux   = "aux"   // a request without a shell tool (titles and the like)
	TurnOther = "other" // not a model request
)

// Request is one request the server got.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Turn is how the server answered it (Turn* constants).
	Turn string
	// Tool is the tool the server called in a TurnTool answer.
	Tool string
	// At is when the request came (a test measures a CLI's own waits).
	At time.Time
}

// Server is the fake model endpoint.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT, without /v1.
	URL    string
	script Script
	srv    *httptest.Server

	mu       sync.Mutex
	requests []Request
	errs     []string
	refused  int       // requests refused by Script.Limit
	reset    time.Time // the reset they gave
}

// NewServer starts a fake model endpoint for t; it stops when t ends.
func NewServer(t testing.TB, s Script) *Server {
	t.Helper()
	f := &Server{script: s}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve)) // always 127.0.0.1
	f.URL = f.srv.URL
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	return f
}

// Requests returns the requests received so far.
func (f *Server) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Turns returns the Turn of every request received so far, in order,
// leaving out TurnOther.
func (f *Server) Turns() []string {
	var turns []string
	for _, r := range f.Requests() {
		if r.Turn != TurnOther {
			turns = append(turns, r.Turn)
		}
	}
	return turns
}

// Errors returns what the server could not answer (an unknown tool set, a
// malformed body): a test should require it empty.
func (f *Server) Errors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

func (f *Server) record(r Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
}

func (f *Server) fail(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	f.mu.Lock()
	f.errs = append(f.errs, msg)
	f.mu.Unlock()
	http.Error(w, `{"error":{"type":"invalid_request_error","message":"agenttest: `+msg+`"}}`, http.StatusBadRequest)
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.fail(w, "read body: %v", err)
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Turn: TurnOther, At: time.Now()}
	var handler func(http.ResponseWriter, *http.Request, *Request)
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		handler = f.anthropic
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		handler = f.responses
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		handler = f.chat
	}
	if handler == nil {
		// Connectivity probes (Claude Code's HEAD /api/hello) and
		// anything else that is not a model call.
		f.record(req)
		if r.Method == http.MethodHead || r.Method == http.MethodGet && r.URL.Path == "/" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.NotFound(w, r)
		return
	}
	handler(w, r, &req)
}

// shellTools are the shell tools of the CLIs, with how each wants its
// command.
var shellTools = map[string]func(cmd string) any{
	"Bash":         func(cmd string) any { return map[string]any{"command": cmd, "description": "Write the file"} }, // Claude Code
	"bash":         func(cmd string) any { return map[string]any{"command": cmd, "description": "Write the file"} }, // opencode
	"exec_command": func(cmd string) any { return map[string]any{"cmd": cmd} },                                      // codex (unified exec)
	"shell":        func(cmd string) any { return map[string]any{"command": []string{"bash", "-lc", cmd}} },         // codex (classic)
	"exec":         func(cmd string) any { return map[string]any{"command": cmd} },                                  // openclaw
}

// pickShell returns the first shell tool among names, in the server's
// order of preference.
func pickShell(names []string) string {
	for _, want := range []string{"Bash", "bash", "exec_command", "shell", "exec"} {
		if slices.Contains(names, want) {
			return want
		}
	}
	return ""
}

// command is the shell command of the tool turn.
func (f *Server) command() string {
	cmd := "printf '%s' " + shellQuote(f.script.Content) + " > " + shellQuote(f.script.File)
	if f.script.Then != "" {
		cmd += " && " + f.script.Then
	}
	return cmd
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// hold waits, when the script says so, until the client gives up.
func (f *Server) hold(r *http.Request) bool {
	if !f.script.HoldFinal {
		return false
	}
	<-r.Context().Done()
	return true
}

// sse writes server-sent events.
type sse struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return &sse{w: w, fl: fl}
}

// event writes one event named by data's "type".
func (s *sse) event(data map[string]any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", data["type"], b)
	if s.fl != nil {
		s.fl.Flush()
	}
}

func (s *sse) raw(line string) {
	fmt.Fprint(s.w, line)
	if s.fl != nil {
		s.fl.Flush()
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// decode reads a request's JSON body.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}
