package console

import (
	"encoding/json"
	"fmt"
	"strings"
)

// step is one readable step of a run: an agent's message, a tool call
// with its arguments and its result (folded), the final result, or a
// plain log line.
type step struct {
	Kind   string // message, tool, result, log
	Title  string
	Body   string
	Folded string // shown folded: a tool's result
}

// replay renders a run's log as steps. Lines of Claude Code's
// stream-json, Codex's `exec --json` events and OpenCode's JSON events
// become messages and tool calls; any other line is a log step, and
// consecutive log lines are one step.
func replay(log string) []step {
	var out []step
	pending := map[string]int{} // a tool call's id → its step, for its result
	for line := range strings.SplitSeq(log, "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
			if n := len(out); n > 0 && out[n-1].Kind == "log" {
				out[n-1].Body += "\n" + line
			} else {
				out = append(out, step{Kind: "log", Body: line})
			}
			continue
		}
		out = append(out, jsonSteps(ev, pending, out)...)
	}
	return out
}

func jsonSteps(ev map[string]any, pending map[string]int, sofar []step) []step {
	typ := str(ev["type"])
	switch typ {
	case "assistant", "user": // Claude Code
		var out []step
		msg, _ := ev["message"].(map[string]any)
		content, _ := msg["content"].([]any)
		for _, c := range content {
			part, _ := c.(map[string]any)
			switch str(part["type"]) {
			case "text":
				out = append(out, step{Kind: "message", Title: typ, Body: str(part["text"])})
			case "thinking":
				out = append(out, step{Kind: "message", Title: "thinking", Body: str(part["thinking"])})
			case "tool_use":
				pending[str(part["id"])] = len(sofar) + len(out)
				out = append(out, step{Kind: "tool", Title: str(part["name"]), Body: compact(part["input"])})
			case "tool_result":
				if i, ok := pending[str(part["tool_use_id"])]; ok && i < len(sofar) {
					sofar[i].Folded = textOf(part["content"])
					continue
				}
				out = append(out, step{Kind: "tool", Title: "result", Folded: textOf(part["content"])})
			}
		}
		return out
	case "result": // Claude Code's last line
		title := "result"
		if c, ok := ev["total_cost_usd"].(float64); ok {
			title = fmt.Sprintf("result ($%.4f)", c)
		}
		return []step{{Kind: "result", Title: title, Body: str(ev["result"])}}
	case "system":
		return nil
	case "item.completed": // Codex
		item, _ := ev["item"].(map[string]any)
		switch str(item["type"]) {
		case "agent_message":
			return []step{{Kind: "message", Title: "assistant", Body: str(item["text"])}}
		case "reasoning":
			return []step{{Kind: "message", Title: "thinking", Body: str(item["text"])}}
		case "command_execution":
			return []step{{Kind: "tool", Title: "command", Body: str(item["command"]),
				Folded: str(item["aggregated_output"])}}
		case "file_change", "mcp_tool_call", "web_search":
			return []step{{Kind: "tool", Title: str(item["type"]), Body: compact(item)}}
		}
		return nil
	case "turn.completed":
		return []step{{Kind: "result", Title: "turn completed", Body: compact(ev["usage"])}}
	case "text": // OpenCode
		part, _ := ev["part"].(map[string]any)
		return []step{{Kind: "message", Title: "assistant", Body: str(part["text"])}}
	case "tool_use":
		part, _ := ev["part"].(map[string]any)
		state, _ := part["state"].(map[string]any)
		return []step{{Kind: "tool", Title: str(part["tool"]), Body: compact(state["input"]), Folded: textOf(state["output"])}}
	case "thread.started", "turn.started", "item.started", "step_start", "step_finish":
		return nil
	}
	return []step{{Kind: "log", Body: compact(ev)}}
}

func str(v any) string { s, _ := v.(string); return s }

func compact(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// textOf flattens a tool result: a string, or a list of text parts.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		var b strings.Builder
		for _, p := range x {
			if m, ok := p.(map[string]any); ok && str(m["type"]) == "text" {
				b.WriteString(str(m["text"]))
				b.WriteString("\n")
			}
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	return compact(v)
}
