package agenttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// post sends a model request and returns the data lines of its stream.
func post(t *testing.T, url, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
		events = append(events, ev)
	}
	require.NoError(t, sc.Err())
	return events
}

func TestServerScriptsEachWire(t *testing.T) {
	t.Parallel()
	script := Script{File: "a b.txt", Content: "it's\n", Answer: "done",
		Tool: Usage{Input: 10, CacheRead: 5, CacheWrite: 1, Output: 3}, Final: Usage{Input: 20, Output: 4}}
	tests := []struct {
		name, path    string
		first, second string
		want          []string // substrings of the first turn's stream
		final         string   // substring of the second's
	}{
		{"anthropic", "/v1/messages",
			`{"model":"m","stream":true,"tools":[{"name":"Read"},{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x"}]}]}`,
			[]string{`"name":"Bash"`, `printf`, `'a b.txt'`, `"input_tokens":10`, `"cache_read_input_tokens":5`, `"output_tokens":3`},
			`"text":"done"`},
		{"responses", "/v1/responses",
			`{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"}],"input":[{"type":"message","role":"user"}]}`,
			`{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[{"type":"function_call_output","call_id":"c"}]}`,
			[]string{`"name":"exec_command"`, `cmd`, `'a b.txt'`, `"input_tokens":15`, `"cached_tokens":5`, `"output_tokens":3`},
			`"text":"done"`},
		{"chat", "/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user"}]}`,
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"tool"}]}`,
			[]string{`"name":"bash"`, `"prompt_tokens":15`, `"completion_tokens":3`},
			`"content":"done"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := NewServer(t, script)
			first, err := json.Marshal(post(t, srv.URL+tt.path, tt.first))
			require.NoError(t, err)
			for _, w := range tt.want {
				require.Contains(t, string(first), w)
			}
			second, err := json.Marshal(post(t, srv.URL+tt.path, tt.second))
			require.NoError(t, err)
			require.Contains(t, string(second), tt.final)
			aux, err := json.Marshal(post(t, srv.URL+tt.path, `{"model":"m","stream":true,"messages":[{"role":"user","content":"title?"}],"input":"title?"}`))
			require.NoError(t, err)
			require.Contains(t, string(aux), "Fake title")
			require.Equal(t, []string{TurnTool, TurnFinal, TurnAux}, srv.Turns())
			require.Empty(t, srv.Errors())
		})
	}
}

// A command codex reports still running after its yield time is waited
// for with write_stdin until its output says it exited; then the answer.
func TestServerWaitsForARunningCommand(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, Script{Answer: "done", Final: Usage{Input: 20, Output: 4}})
	tools := `"tools":[{"type":"function","name":"exec_command"},{"type":"function","name":"write_stdin"}]`
	// What codex 0.169 sends back, JSON-escaped.
	running := `Chunk ID: e04542\nWall time: 10.0011 seconds\nProcess running with session ID 83006\nOriginal token count: 0\nOutput:\n`
	exited := `Chunk ID: f6dccc\nWall time: 1.7350 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\nslept\n`
	poll, err := json.Marshal(post(t, srv.URL+"/v1/responses", `{"model":"m","stream":true,`+tools+
		`,"input":[{"type":"function_call_output","call_id":"c","output":"`+running+`"}]}`))
	require.NoError(t, err)
	require.Contains(t, string(poll), `"name":"write_stdin"`)
	require.Contains(t, string(poll), `\"session_id\":83006`)
	require.Contains(t, string(poll), `"output_tokens":0`)
	// Outputs may come as content items too.
	_, err = json.Marshal(post(t, srv.URL+"/v1/responses", `{"model":"m","stream":true,`+tools+
		`,"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"`+running+`"}]}]}`))
	require.NoError(t, err)
	final, err := json.Marshal(post(t, srv.URL+"/v1/responses", `{"model":"m","stream":true,`+tools+
		`,"input":[{"type":"function_call_output","call_id":"c","output":"`+running+`"},`+
		`{"type":"function_call","call_id":"d","name":"write_stdin"},{"type":"function_call_output","call_id":"d","output":"`+exited+`"}]}`))
	require.NoError(t, err)
	require.Contains(t, string(final), `"text":"done"`)
	require.Equal(t, []string{TurnPoll, TurnPoll, TurnFinal}, srv.Turns())
	require.Empty(t, srv.Errors())
}

func TestServerRefusesWhatItCannotScript(t *testing.T) {
	t.Parallel()
	srv := NewServer(t, Script{})
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", bytes.NewReader([]byte("{")))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Len(t, srv.Errors(), 1)
	resp, err = http.Head(srv.URL + "/api/hello")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestScriptTotals(t *testing.T) {
	t.Parallel()
	s := Script{Tool: Usage{Input: 1200, CacheRead: 300, CacheWrite: 100, Output: 40}, Final: Usage{Input: 1500, CacheRead: 200, Output: 25}}
	require.Equal(t, int64(3300), s.TokensIn(false))
	require.Equal(t, int64(3200), s.TokensIn(true))
	require.Equal(t, int64(65), s.TokensOut())
	require.InDelta(t, 0.0096, s.Cost(), 1e-12)
}

func TestBwrap(t *testing.T) {
	t.Parallel()
	root := Bwrap("/w", "/h", 0)
	require.Equal(t, "bwrap", root[0])
	require.Equal(t, "--", root[len(root)-1])
	require.Subset(t, root, []string{"--unshare-pid", "--die-with-parent", "--new-session"})
	user := Bwrap("/w", "/h", 65534)
	require.Equal(t, []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, user[:4])
	require.Equal(t, root, user[4:])
}

// The tool turn's command writes exactly the content, whatever it holds.
func TestCommandWritesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := &Server{script: Script{File: "a b.txt", Content: "it's \"$HOME\" %s\n\\n"}}
	cmd := exec.Command("/bin/sh", "-c", f.command())
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got, err := os.ReadFile(filepath.Join(dir, "a b.txt"))
	require.NoError(t, err)
	require.Equal(t, f.script.Content, string(got))
}
