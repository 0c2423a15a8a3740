package workspace_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/spawner/backend/local/workspace"
)

// The first clone of a repository is announced before it starts (it can
// take minutes while a run waits), and only the first.
func TestFirstMirrorCloneIsLoggedBeforeItStarts(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setup(t, func(c *workspace.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	f.prepare(t, workspace.Request{TaskID: 1, Mode: workspace.Detached})
	f.mgr.Done(1)
	f.prepare(t, workspace.Request{TaskID: 2, Mode: workspace.Detached})

	out := logs.String()
	before := strings.Index(out, "mirroring repository: its first clone")
	after := strings.Index(out, "repository mirrored")
	require.GreaterOrEqual(t, before, 0, "announced: %s", out)
	require.Greater(t, after, before, "announced before it is done: %s", out)
	assert.Equal(t, 1, strings.Count(out, "mirroring repository"), "the second task reuses the mirror")
	assert.Contains(t, out[before:after], "repo=acme/widget")
}
