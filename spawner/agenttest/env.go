package agenttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Prices, in USD per million tokens, of the model the CLIs are told to
// use: Claude Code's own table for claude-sonnet-4-5, and what the
// opencode and openclaw configurations written by Env declare.
const (
	PriceInput      = 3.0
	PriceOutput     = 15.0
	PriceCacheRead  = 0.30
	PriceCacheWrite = 3.75
)

// Models the CLIs are pointed at.
const (
	AnthropicModel = "claude-sonnet-4-5" // priced by Claude Code itself
	OpenAIModel    = "gpt-5.5"
	FakeModel      = "fake-model" // the custom providers of opencode and openclaw
)

// FakeAPIKey is the key every CLI sends; the server accepts anything.
const FakeAPIKey = "sk-agenttest-not-a-secret"

// FakeOAuthToken is Claude Code's subscription token under
// Script.Subscription.
const FakeOAuthToken = "sk-ant-oat01-agenttest-not-a-secret"

// TokensIn is what a run of the script reads, as mozi counts it; openAI:
// on the OpenAI wire, which has no cache writes.
func (s Script) TokensIn(openAI bool) int64 {
	if openAI {
		return s.Tool.Input + s.Tool.CacheRead + s.Final.Input + s.Final.CacheRead
	}
	return s.Tool.In() + s.Final.In()
}

// TokensOut is what a run of the script writes.
func (s Script) TokensOut() int64 { return s.Tool.Output + s.Final.Output }

// Cost is what a run of the script costs at the Price* constants.
func (s Script) Cost() float64 {
	cost := 0.0
	for _, u := range []Usage{s.Tool, s.Final} {
		cost += (float64(u.Input)*PriceInput + float64(u.Output)*PriceOutput +
			float64(u.CacheRead)*PriceCacheRead + float64(u.CacheWrite)*PriceCacheWrite) / 1e6
	}
	return cost
}

// Env writes into home what the CLI of the named preset needs to talk to
// the server, and to nothing else, and returns the variables to run it
// with (HOME is home). Telemetry, update checks, model catalogue fetches
// and plugin installs are switched off.
func (f *Server) Env(preset, home string) (map[string]string, error) {
	env := map[string]string{"HOME": home}
	write := func(rel, content string) error {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("agenttest: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("agenttest: %w", err)
		}
		return nil
	}
	switch preset {
	case "claude-code":
		env["ANTHROPIC_BASE_URL"] = f.URL
		env["ANTHROPIC_API_KEY"] = FakeAPIKey
		if f.script.Subscription {
			delete(env, "ANTHROPIC_API_KEY")
			env["CLAUDE_CODE_OAUTH_TOKEN"] = FakeOAuthToken
		}
		env["ANTHROPIC_MODEL"] = AnthropicModel
		// Telemetry, error reports, the auto-updater and other traffic
		// that is not the model's (without it Claude Code resolves
		// api.anthropic.com).
		env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
		env["DISABLE_AUTOUPDATER"] = "1"
		env["DISABLE_TELEMETRY"] = "1"
		env["DISABLE_ERROR_REPORTING"] = "1"
	case "codex":
		env["CODEX_HOME"] = filepath.Join(home, ".codex")
		env["OPENAI_API_KEY"] = FakeAPIKey
		// A custom provider (OPENAI_BASE_URL is ignored); plugins, remote
		// plugins and apps off, or codex resolves github.com and
		// chatgpt.com; no websocket, no retries against a fake.
		err := write(".codex/config.toml", fmt.Sprintf(`model = %q
model_provider = "agenttest"

[model_providers.agenttest]
name = "agenttest"
base_url = %q
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false
`, OpenAIModel, f.URL+"/v1"))
		if err != nil {
			return nil, err
		}
	case "opencode":
		// Without these opencode fetches its model catalogue, checks for
		// updates and installs its plugin package from the npm registry.
		env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
		env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
		env["OPENCODE_DISABLE_LSP_DOWNLOAD"] = "1"
		env["OPENCODE_DISABLE_SHARE"] = "1"
		env["npm_config_offline"] = "true"
		sdk := "@ai-sdk/anthropic"
		if f.script.OpencodeOpenAI {
			sdk = "@ai-sdk/openai" // bundled with opencode, as the Anthropic one is
		}
		cfg := map[string]any{
			"autoupdate": false,
			"share":      "disabled",
			"model":      "agenttest/" + FakeModel,
			"provider": map[string]any{"agenttest": map[string]any{
				"npm":     sdk,
				"name":    "agenttest",
				"options": map[string]any{"baseURL": f.URL + "/v1", "apiKey": FakeAPIKey},
				"models": map[string]any{FakeModel: map[string]any{"name": FakeModel,
					"cost": map[string]any{"input": PriceInput, "output": PriceOutput, "cache_read": PriceCacheRead,
						"cache_write": PriceCacheWrite},
					"limit": map[string]any{"context": 200000, "output": 8192}}},
			}},
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := write(".config/opencode/opencode.json", string(b)); err != nil {
			return nil, err
		}
	case "openclaw":
		// Bundled plugins (channels, browser, providers) are not needed to
		// reach a custom provider, and loading them triples a run's time.
		env["OPENCLAW_DISABLE_BUNDLED_PLUGINS"] = "1"
		env["OPENCLAW_NO_AUTO_UPDATE"] = "1"
		cfg := map[string]any{
			"models": map[string]any{"providers": map[string]any{"agenttest": map[string]any{
				"baseUrl": f.URL, "apiKey": FakeAPIKey, "api": "anthropic-messages",
				"models": []any{map[string]any{"id": FakeModel, "name": FakeModel, "reasoning": false, "input": []string{"text"},
					"cost": map[string]any{"input": PriceInput, "output": PriceOutput, "cacheRead": PriceCacheRead,
						"cacheWrite": PriceCacheWrite},
					"contextWindow": 200000, "maxTokens": 8192}},
			}}},
			"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": "agenttest/" + FakeModel}}},
		}
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := write(".openclaw/openclaw.json", string(b)); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("agenttest: no environment for preset %q", preset)
	}
	return env, nil
}

// OpenAIWire reports whether the preset's CLI talks to the server over the
// OpenAI wire (input counts cached tokens, no cache writes).
func OpenAIWire(preset string) bool { return preset == "codex" }
