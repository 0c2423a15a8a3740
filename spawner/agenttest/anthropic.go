package agenttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

var ids atomic.Int64

func nextID(prefix string) string { return fmt.Sprintf("%s_%04d", prefix, ids.Add(1)) }

type anthropicRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// hasToolResult reports whether a tool's result came back.
func (a *anthropicRequest) hasToolResult() bool {
	for _, m := range a.Messages {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil { // a plain string
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return true
			}
		}
	}
	return false
}

// anthropic answers POST /v1/messages.
func (f *Server) anthropic(w http.ResponseWriter, r *http.Request, req *Request) {
	var in anthropicRequest
	if err := decode(req.Body, &in); err != nil {
		f.record(*req)
		f.fail(w, "decode messages request: %v", err)
		return
	}
	names := make([]string, 0, len(in.Tools))
	for _, t := range in.Tools {
		names = append(names, t.Name)
	}
	shell := pickShell(names)
	if shell != "" && f.limited(w, req, false) {
		return
	}
	var blocks []map[string]any
	var usage Usage
	stop := "end_turn"
	switch {
	case shell == "":
		req.Turn = TurnAux
		blocks = []map[string]any{{"type": "text", "text": "Fake title"}}
	case in.hasToolResult():
		req.Turn = TurnFinal
		f.record(*req)
		if f.hold(r) {
			return
		}
		blocks, usage = []map[string]any{{"type": "text", "text": f.script.Answer}}, f.script.Final
	default:
		req.Turn, req.Tool = TurnTool, shell
		usage, stop = f.script.Tool, "tool_use"
		blocks = []map[string]any{
			{"type": "text", "text": "I will write the file."},
			{"type": "tool_use", "id": nextID("toolu"), "name": shell, "input": shellTools[shell](f.command())},
		}
	}
	if req.Turn != TurnFinal {
		f.record(*req)
	}
	id := nextID("msg")
	usageJSON := func(out int64) map[string]any {
		return map[string]any{"input_tokens": usage.Input, "cache_read_input_tokens": usage.CacheRead,
			"cache_creation_input_tokens": usage.CacheWrite, "output_tokens": out}
	}
	if !in.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": in.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usageJSON(usage.Output)})
		return
	}
	s := newSSE(w)
	// As the real API does: message_start carries the input and a first
	// output token, message_delta the final figures.
	s.event(map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": in.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": usageJSON(min(1, usage.Output))}})
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			s.event(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			s.event(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			s.event(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use",
				"id": b["id"], "name": b["name"], "input": map[string]any{}}})
			s.event(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta",
				"partial_json": mustJSON(b["input"])}})
		}
		s.event(map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": usageJSON(usage.Output)})
	s.event(map[string]any{"type": "message_stop"})
}
