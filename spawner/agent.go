package spawner

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/moziplus/mozi/spawner/backend"
)

// Agent is what the spawner needs to run one declared agent.
type Agent struct {
	// Agent is what its backend needs: login, command (its Argv has
	// {prompt_file} / {prompt} placeholders; with neither, the prompt goes
	// to stdin), home, working directory or worktree, sandbox, image,
	// limits.
	backend.Agent
	Timeout time.Duration
	// TokenEnv names the variable of mozi's environment that holds the
	// agent's own Gitea token; the agent gets it as GITEA_TOKEN and under
	// that name.
	TokenEnv string
	// TokenFile, instead, is a file holding it (read at each run, so a
	// rotated token is picked up).
	TokenFile string
	// Usage is the output format to read usage from (a preset's).
	Usage      string
	MaxCostUSD float64
	MaxTokens  int64
	// Env are extra variables for the agent; PassEnv names variables of
	// mozi's environment passed through (an API key the CLI needs).
	Env     map[string]string
	PassEnv []string
	// PresetEnv are the preset's own variables (Resolved.Env), set before
	// PassEnv and Env, which win over them.
	PresetEnv map[string]string
	// Credential names the provider account the agent's CLI runs on:
	// agents on one account are paused together at its usage limit
	// (default: a hash of its provider key, else the agent alone).
	Credential string
}

// Resolved is an agent's command as mozi runs it.
type Resolved struct {
	// Argv with {prompt_file} / {prompt} placeholders.
	Argv []string
	// Usage is the output format to read usage from ("" for an agent's own
	// command).
	Usage string
	// Env are the preset's variables (Agent.PresetEnv).
	Env map[string]string
}

// ResolveAgent resolves an agent's command: its own argv, the shell
// preset's script, or a preset's argv with args inserted before the
// preset's positional arguments (so an operator adds a flag without
// losing the preset's usage format).
func ResolveAgent(preset string, command []string, script string, args []string) (Resolved, error) {
	if len(command) > 0 {
		return Resolved{Argv: slices.Clone(command)}, nil
	}
	p, ok := LookupPreset(preset)
	if !ok {
		return Resolved{}, fmt.Errorf("unknown preset %q", preset)
	}
	if preset == "shell" {
		return Resolved{Argv: append(p.Command, script), Env: p.Env}, nil
	}
	at := len(p.Command) - p.Positional
	argv := slices.Concat(p.Command[:at], args, p.Command[at:])
	return Resolved{Argv: argv, Usage: p.Output, Env: p.Env}, nil
}

// baseEnv is what an agent inherits from mozi's environment: enough to
// run, nothing of mozi's own configuration.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

// neverPassed are mozi's own secrets and settings: no configuration can
// hand them to an agent.
func neverPassed(name string) bool {
	return strings.HasPrefix(name, "MOZI_") || strings.HasPrefix(name, "PG")
}

// token is the agent's own Gitea token, "" when it has none.
func (a Agent) token(getenv func(string) string) string {
	if a.TokenFile != "" {
		data, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
	if a.TokenEnv != "" {
		return getenv(a.TokenEnv)
	}
	return ""
}

// secretNameParts mark a variable whose value is a credential by its name
// (ANTHROPIC_API_KEY, OPENAI_API_KEY, NPM_TOKEN, DB_PASSWORD, …).
var secretNameParts = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL"}

// secretValues are the values of the agent's pass_env and env variables
// whose names say they are credentials: the run's output is redacted of
// them (the Gitea token is redacted anyway).
func (a Agent) secretValues(getenv func(string) string) []string {
	secret := func(name string) bool {
		up := strings.ToUpper(name)
		return slices.ContainsFunc(secretNameParts, func(p string) bool { return strings.Contains(up, p) })
	}
	var out []string
	for _, k := range a.PassEnv {
		if v := getenv(k); v != "" && secret(k) {
			out = append(out, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		if v := a.Env[k]; v != "" && secret(k) {
			out = append(out, v)
		}
	}
	return out
}

// Vars are the per-run variables mozi gives an agent.
type Vars struct {
	TaskID     int64
	Repo       string
	Issue      int
	PR         int
	Action     string
	Attempt    int
	PromptFile string
	GiteaURL   string
}

// environment builds an agent's whole environment.
func environment(a Agent, v Vars, getenv func(string) string) []string {
	env := make([]string, 0, 32)
	set := func(k, val string) { env = append(env, k+"="+val) }
	for _, k := range baseEnv {
		if val := getenv(k); val != "" {
			set(k, val)
		}
	}
	for _, k := range os.Environ() {
		if name, val, ok := strings.Cut(k, "="); ok && strings.HasPrefix(name, "LC_") && getenv(name) == val {
			set(name, val)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.PresetEnv)) {
		if !neverPassed(k) {
			set(k, a.PresetEnv[k])
		}
	}
	for _, k := range a.PassEnv {
		if val := getenv(k); val != "" && !neverPassed(k) {
			set(k, val)
		}
	}
	for k, val := range a.Env {
		if !neverPassed(k) {
			set(k, val)
		}
	}
	if tok := a.token(getenv); tok != "" {
		set("GITEA_TOKEN", tok)
		if a.TokenEnv != "" && a.TokenEnv != "GITEA_TOKEN" {
			set(a.TokenEnv, tok)
		}
	}
	set("MOZI_TASK_ID", fmt.Sprint(v.TaskID))
	set("MOZI_REPO", v.Repo)
	set("MOZI_ISSUE", fmt.Sprint(v.Issue))
	set("MOZI_PR", fmt.Sprint(v.PR))
	set("MOZI_ACTION", v.Action)
	set("MOZI_AGENT", a.Login)
	set("MOZI_ATTEMPT", fmt.Sprint(v.Attempt))
	set("MOZI_PROMPT_FILE", v.PromptFile)
	set("MOZI_GITEA_URL", v.GiteaURL)
	set("GITEA_URL", v.GiteaURL)
	return env
}

// argv fills the command's prompt placeholders; it reports whether the
// prompt must also go to stdin.
func argv(cmd []string, promptFile, prompt string) ([]string, bool) {
	out := make([]string, len(cmd))
	viaArgs := false
	for i, a := range cmd {
		if strings.Contains(a, PlaceholderPromptFile) || strings.Contains(a, PlaceholderPrompt) {
			viaArgs = true
		}
		a = strings.ReplaceAll(a, PlaceholderPromptFile, promptFile)
		out[i] = strings.ReplaceAll(a, PlaceholderPrompt, prompt)
	}
	return out, !viaArgs
}
