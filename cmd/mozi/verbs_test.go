package main

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad verbs and IDs are usage errors found before any database is opened
// (no configuration or database exists here).
func TestTaskAndMigrateVerbUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"task without verb", []string{"task"}, "task needs: show ID | retry ID | cancel ID | create"},
		{"task unknown verb", []string{"task", "sideways", "5"}, `task: unknown action "sideways" (want show, retry, resume, cancel or create)`},
		{"task show without ID", []string{"task", "show"}, "task show needs one task ID"},
		{"task retry with two IDs", []string{"task", "retry", "1", "2"}, "task retry needs one task ID"},
		{"task cancel of no ID", []string{"task", "cancel", "x"}, `task cancel: "x" is not a task ID`},
		{"task show of ID 0", []string{"task", "show", "0"}, `task show: "0" is not a task ID`},
		{"migrate two verbs", []string{"migrate", "up", "down"}, "migrate needs exactly one of up, down, status"},
		{"migrate unknown verb", []string{"migrate", "sideways"}, `migrate: unknown action "sideways" (want up, down or status)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(string) string { return "" }, &stdout, &stderr)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Equal(t, 2, exitCode(err), "a usage error")
			assert.Empty(t, stdout.String())
		})
	}
}

// The usage messages name every verb there is, and only those.
func TestTaskAndMigrateVerbTables(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"cancel", "create", "resume", "retry", "show"}, slices.Sorted(maps.Keys(taskVerbs)))
	for name, v := range taskVerbs {
		assert.Equal(t, name != "create", v.takesID, "%s takes a task ID", name)
	}
	assert.Equal(t, []string{"down", "status", "up"}, slices.Sorted(maps.Keys(migrateVerbs)))
}
