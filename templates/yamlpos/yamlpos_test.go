package yamlpos_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/templates/yamlpos"
)

type config struct {
	Agents []struct {
		Login   string            `yaml:"login"`
		Command []string          `yaml:"command"`
		Args    []string          `yaml:"args"`
		Env     map[string]string `yaml:"env"`
	} `yaml:"agents"`
	Gitea struct {
		URL   string   `yaml:"url"`
		Repos []string `yaml:"repos"`
	} `yaml:"gitea"`
}

// A syntax error names the line where the document goes wrong, not the
// first line of the mapping or sequence around it (yaml.v3's mark).
func TestSyntaxErrorsNameTheFaultyLine(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unclosed flow sequence", "agents:\n  - login: a\n    command: [a\n  - login: b\n",
			"m.yaml:3: did not find expected ',' or ']'"},
		{"tab in the indentation", "gitea:\n  url: http://x\n\trepos: []\n",
			"m.yaml:3: found a tab character that violates indentation"},
		{"an unclosed mapping after a flow list over two lines", "agents:\n  - login: a\n    args: [--model,\n      x]\n    env: {A: b\n",
			"m.yaml:5: did not find expected ',' or '}'"},
		{"a key without a colon", "gitea:\n  url: http://x\n  repos\n  x: 1\n", "m.yaml:3: could not find expected ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c config
			_, err := yamlpos.Decode("m.yaml", []byte(tt.doc), &c)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}
