package spawner

import (
	"slices"
	"sort"
)

// Placeholders an agent's argv may contain; the spawner fills them per run.
const (
	PlaceholderPromptFile = "{prompt_file}" // path of a file holding the prompt
	PlaceholderPrompt     = "{prompt}"      // the prompt text itself
)

// Preset is a known agent CLI: how to run it unattended and how it wants
// its prompt.
type Preset struct {
	Name string
	// Command is the argv; without a prompt placeholder the prompt goes to
	// stdin.
	Command []string
	// Output names the format the CLI reports usage in ("" when it does not
	// report tokens or cost), for budgets and metrics.
	Output string
}

// presets are the agent CLIs mozi knows how to drive unattended.
var presets = map[string]Preset{
	"claude-code": {
		Name:    "claude-code",
		Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "bypassPermissions"},
		Output:  "claude-stream-json",
	},
	"codex": {
		Name:    "codex",
		Command: []string{"codex", "exec", "--json", "--full-auto", "-"},
		Output:  "codex-json",
	},
	"aider": {
		Name:    "aider",
		Command: []string{"aider", "--yes-always", "--no-pretty", "--no-stream", "--message-file", PlaceholderPromptFile},
	},
	"opencode": {
		Name:    "opencode",
		Command: []string{"opencode", "run", PlaceholderPrompt},
	},
	"goose": {
		Name:    "goose",
		Command: []string{"goose", "run", "--no-session", "--instructions", PlaceholderPromptFile},
	},
	"openclaw": {
		Name:    "openclaw",
		Command: []string{"openclaw", "agent", "--message", PlaceholderPrompt},
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
