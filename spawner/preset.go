package spawner

import (
	"maps"
	"slices"
	"sort"
)

// Placeholders an agent's argv may contain; the spawner fills them per run.
const (
	PlaceholderPromptFile = "{prompt_file}" // path of a file holding the prompt
	PlaceholderPrompt     = "{prompt}"      // the prompt text itself
)

// Usage formats a preset's output is read in (see usageMeter).
const (
	UsageClaudeStreamJSON = "claude-stream-json"
	UsageCodexJSON        = "codex-json"
	UsageOpencodeJSON     = "opencode-json"
	UsageOpenclawJSON     = "openclaw-json"
)

// Preset is a known agent CLI: how to run it unattended and how it wants
// its prompt.
//
// Every preset runs the CLI without its own permission prompts and
// without its own sandbox: mozi runs each agent in a bubblewrap sandbox
// of its own (a CLI's sandbox either cannot nest in it or keeps the agent
// from committing and pushing), and nobody is there to answer a prompt.
type Preset struct {
	Name string
	// Command is the argv; without a prompt placeholder the prompt goes to
	// stdin.
	Command []string
	// Positional is how many items at the end of Command are positional
	// arguments (the prompt, "-" for stdin): an agent's extra args go
	// before them.
	Positional int
	// Env are variables the CLI needs to run unattended; an agent's own
	// env wins over them.
	Env map[string]string
	// Output names the format the CLI reports usage in ("" when it does not
	// report tokens or cost), for budgets and metrics.
	Output string
}

// presets are the agent CLIs mozi knows how to drive unattended. What was
// verified against which CLI version is in docs/agents.md.
var presets = map[string]Preset{
	"claude-code": {
		Name:    "claude-code",
		Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions"},
		// Claude Code refuses bypassPermissions as root unless it is told
		// it runs in a sandbox (mozi runs agents as root only when an
		// operator turned the sandbox off).
		Env:    map[string]string{"IS_SANDBOX": "1"},
		Output: UsageClaudeStreamJSON,
	},
	"codex": {
		Name: "codex",
		// --full-auto is gone (codex 0.169); its workspace-write sandbox
		// nests in bubblewrap but keeps .git read-only and the network
		// off, so the agent could neither commit nor push: mozi's sandbox
		// replaces it.
		Command:    []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "-"},
		Positional: 1,
		Output:     UsageCodexJSON,
	},
	"aider": {
		Name: "aider",
		// aider declines every shell command the model suggests under
		// --yes-always (they need an explicit yes): it edits and commits
		// only, so it is asked not to suggest any.
		Command: []string{"aider", "--yes-always", "--no-pretty", "--no-stream", "--no-check-update", "--no-analytics",
			"--no-suggest-shell-commands", "--message-file", PlaceholderPromptFile},
	},
	"opencode": {
		Name: "opencode",
		// The prompt on stdin; --auto approves what would otherwise be
		// asked (and auto-rejected) in a run without a terminal.
		Command: []string{"opencode", "run", "--format", "json", "--auto"},
		Output:  UsageOpencodeJSON,
	},
	"goose": {
		Name:    "goose",
		Command: []string{"goose", "run", "--no-session", "--instructions", PlaceholderPromptFile},
		Env:     map[string]string{"GOOSE_MODE": "auto"},
	},
	"openclaw": {
		Name: "openclaw",
		// agent exec is the embedded one-shot run (no Gateway, no session
		// target); the prompt on stdin; mozi's timeout, not openclaw's 600s.
		Command: []string{"openclaw", "agent", "exec", "--message-file", "-", "--json", "--timeout", "0"},
		Output:  UsageOpenclawJSON,
	},
	"shell": {
		// A plain shell script receives the prompt on stdin and in
		// $MOZI_PROMPT_FILE; set script: (or command:) to choose it.
		Name:    "shell",
		Command: []string{"/bin/sh", "-c"},
	},
}

// LookupPreset returns the preset with the given name.
func LookupPreset(name string) (Preset, bool) {
	p, ok := presets[name]
	if ok {
		p.Command = slices.Clone(p.Command)
		p.Env = maps.Clone(p.Env)
	}
	return p, ok
}

// PresetNames lists the known presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
