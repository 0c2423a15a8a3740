package agenttest

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Input json.RawMessage `json:"input"`
}

// hasToolResult reports whether a tool's output came back.
func (o *responsesRequest) hasToolResult() bool {
	var items []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(o.Input, &items) != nil { // a plain string
		return false
	}
	for _, it := range items {
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
			return true
		}
	}
	return false
}

// runningRE is what codex's exec_command (and write_stdin) answers when the
// command is still running after the call's yield time (10 s unless the
// call says otherwise): the model is to wait for it with write_stdin.
var runningRE = regexp.MustCompile(`Process running with session ID (\d+)`)

// stillRunning returns the session of the command whose output is the
// request's last input item when that output says it still runs.
func (o *responsesRequest) stillRunning() (int64, bool) {
	var items []struct {
		Type   string          `json:"type"`
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(o.Input, &items) != nil || len(items) == 0 {
		return 0, false
	}
	last := items[len(items)-1]
	if last.Type != "function_call_output" {
		return 0, false
	}
	// A string, or content items with text.
	text := ""
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(last.Output, &text) != nil && json.Unmarshal(last.Output, &parts) == nil {
		for _, p := range parts {
			text += p.Text
		}
	}
	m := runningRE.FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	return id, err == nil
}

// pollYieldMS is how long a poll waits for the running command's output:
// codex's maximum.
const pollYieldMS = 30000

// openAIUsage is usage on the OpenAI wire, where input counts cached tokens.
func openAIUsage(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.Input + u.CacheRead, "input_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.Input + u.CacheRead + u.Output}
}

// responses answers POST /v1/responses (OpenAI Responses API, streamed).
func (f *Server) responses(w http.ResponseWriter, r *http.Request, req *Request) {
	var in responsesRequest
	if err := decode(req.Body, &in); err != nil {
		f.record(*req)
		f.fail(w, "decode responses request: %v", err)
		return
	}
	var names []string
	for _, t := range in.Tools {
		if t.Type == "function" {
			names = append(names, t.Name)
		}
	}
	shell := pickShell(names)
	if shell != "" && f.limited(w, req, true) {
		return
	}
	session, running := in.stillRunning()
	var item map[string]any
	var usage Usage
	switch {
	case shell == "":
		req.Turn = TurnAux
		item = textItem("Fake title")
	case running && slices.Contains(names, "write_stdin"):
		// The script's command has not finished: wait for it, as a
		// model does, or codex ends the turn and kills it.
		req.Turn, req.Tool = TurnPoll, "write_stdin"
		args := map[string]any{"session_id": session, "chars": "", "yield_time_ms": pollYieldMS}
		item = map[string]any{"type": "function_call", "id": nextID("fc"), "call_id": nextID("call"), "name": "write_stdin",
			"arguments": mustJSON(args), "status": "completed"}
	case in.hasToolResult():
		req.Turn = TurnFinal
		f.record(*req)
		if f.hold(r) {
			return
		}
		item, usage = textItem(f.script.Answer), f.script.Final
	default:
		req.Turn, req.Tool = TurnTool, shell
		usage = f.script.Tool
		item = map[string]any{"type": "function_call", "id": nextID("fc"), "call_id": nextID("call"), "name": shell,
			"arguments": mustJSON(shellTools[shell](f.command())), "status": "completed"}
	}
	if req.Turn != TurnFinal {
		f.record(*req)
	}
	resp := map[string]any{"id": nextID("resp"), "object": "response", "created_at": time.Now().Unix(),
		"model": in.Model, "status": "in_progress", "output": []any{}}
	if !in.Stream {
		resp["status"], resp["output"], resp["usage"] = "completed", []any{item}, openAIUsage(usage)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	s := newSSE(w)
	seq := 0
	ev := func(data map[string]any) {
		data["sequence_number"] = seq
		seq++
		s.event(data)
	}
	ev(map[string]any{"type": "response.created", "response": resp})
	ev(map[string]any{"type": "response.in_progress", "response": resp})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	if item["type"] == "message" {
		added["content"] = []any{}
	} else {
		added["arguments"] = ""
	}
	ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": added})
	if item["type"] == "message" {
		text := item["content"].([]any)[0].(map[string]any)["text"]
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		ev(map[string]any{"type": "response.content_part.added", "item_id": item["id"], "output_index": 0, "content_index": 0, "part": part})
		ev(map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text})
		ev(map[string]any{"type": "response.output_text.done", "item_id": item["id"], "output_index": 0, "content_index": 0, "text": text})
		ev(map[string]any{"type": "response.content_part.done", "item_id": item["id"], "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
	} else {
		ev(map[string]any{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0, "delta": item["arguments"]})
		ev(map[string]any{"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0, "arguments": item["arguments"]})
	}
	ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	resp["status"], resp["output"], resp["usage"] = "completed", []any{item}, openAIUsage(usage)
	ev(map[string]any{"type": "response.completed", "response": resp})
}

func textItem(text string) map[string]any {
	return map[string]any{"type": "message", "id": nextID("msg"), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
}

// chat answers POST /v1/chat/completions (OpenAI Chat Completions,
// streamed), the wire of OpenAI-compatible custom providers.
func (f *Server) chat(w http.ResponseWriter, r *http.Request, req *Request) {
	var in chatRequest
	if err := decode(req.Body, &in); err != nil {
		f.record(*req)
		f.fail(w, "decode chat request: %v", err)
		return
	}
	var names []string
	for _, t := range in.Tools {
		names = append(names, t.Function.Name)
	}
	toolResult := false
	for _, m := range in.Messages {
		toolResult = toolResult || m.Role == "tool"
	}
	shell := pickShell(names)
	var delta map[string]any
	var usage Usage
	finish := "stop"
	switch {
	case shell == "":
		req.Turn = TurnAux
		delta = map[string]any{"role": "assistant", "content": "Fake title"}
	case toolResult:
		req.Turn = TurnFinal
		f.record(*req)
		if f.hold(r) {
			return
		}
		delta, usage = map[string]any{"role": "assistant", "content": f.script.Answer}, f.script.Final
	default:
		req.Turn, req.Tool = TurnTool, shell
		usage, finish = f.script.Tool, "tool_calls"
		delta = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"index": 0,
			"id": nextID("call"), "type": "function", "function": map[string]any{"name": shell,
				"arguments": mustJSON(shellTools[shell](f.command()))}}}}
	}
	if req.Turn != TurnFinal {
		f.record(*req)
	}
	id, created := nextID("chatcmpl"), time.Now().Unix()
	u := map[string]any{"prompt_tokens": usage.Input + usage.CacheRead, "completion_tokens": usage.Output,
		"total_tokens":          usage.Input + usage.CacheRead + usage.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": usage.CacheRead}}
	if !in.Stream {
		msg := map[string]any{}
		for k, v := range delta {
			msg[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": u})
		return
	}
	s := newSSE(w)
	chunk := func(choices []any, usage any) {
		s.raw("data: " + mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": in.Model, "choices": choices, "usage": usage}) + "\n\n")
	}
	chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	chunk([]any{}, u)
	s.raw("data: [DONE]\n\n")
}
