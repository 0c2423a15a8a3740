package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConsoleSettings(t *testing.T) {
	tests := []struct {
		name, body string
		wantErr    []string
	}{
		{name: "absent: no console", body: "listen: 127.0.0.1:1\n"},
		{name: "complete", body: "gitea: {url: http://gitea:3000}\nconsole: {listen: 127.0.0.1:8090, public_url: https://mozi.example.com, oauth: {client_id: abc}}\n"},
		{name: "incomplete", body: "console: {listen: nowhere, public_url: mozi.example.com}\n",
			wantErr: []string{"console.listen", `"nowhere" is not host:port`, "console.public_url",
				"console.oauth.client_id", "set gitea.url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("mozi.yaml", []byte(tt.body))
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConsoleClientSecretFromItsVariable(t *testing.T) {
	env := map[string]string{"MOZI_CONSOLE_CLIENT_SECRET": "s1", "OTHER": "s2"}
	getenv := func(k string) string { return env[k] }
	s, err := Console{}.ClientSecret(getenv)
	require.NoError(t, err)
	assert.Equal(t, "s1", s.Value())
	s, err = Console{OAuth: ConsoleOAuth{ClientSecretEnv: "OTHER"}}.ClientSecret(getenv)
	require.NoError(t, err)
	assert.Equal(t, "s2", s.Value())
	assert.Equal(t, DefaultConsoleSessionTTL, Console{}.TTL())
}
