package webhook_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moziplus/mozi/webhook/recording"
)

// A delivery sent again with the same delivery id (Gitea retrying after
// it lost the answer, an operator's redelivery) is answered 200 and
// changes no row: not its stored copy, not the inbox, not the tasks or
// the issues its first delivery made, whether that one still waits in
// the inbox or was processed.
func TestRedeliveryOfTheSameIDChangesNoRow(t *testing.T) {
	t.Parallel()
	gitea := recording.MustLoad()
	forgejo, err := recording.LoadDir(recording.DirOf("forgejo-10.0.0-dev"))
	require.NoError(t, err)
	tests := []struct {
		name string
		// sent are delivered first; the last of them is delivered again.
		sent []recording.Fixture
		// processed: the inbox is drained before the redelivery, and
		// again after it (so that work it queued would show).
		processed bool
	}{
		{
			name: "Gitea: the assignment still waits in the inbox",
			sent: []recording.Fixture{recording.Find(gitea, "007"), recording.Find(gitea, "009")},
		},
		{
			name:      "Gitea: the assignment made its task",
			sent:      []recording.Fixture{recording.Find(gitea, "007"), recording.Find(gitea, "009")},
			processed: true,
		},
		{
			name:      "Forgejo sending X-Forgejo-* headers only: the assignment made its task",
			sent:      []recording.Fixture{recording.Find(forgejo, "001").KeepHeaders("X-Forgejo-")},
			processed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, f := range tt.sent {
				require.Equal(t, http.StatusAccepted, b.post(t, f, nil), f.Name)
			}
			if tt.processed {
				b.drain(t)
			}
			before := b.rows(t)
			require.NotEmpty(t, before["webhook_deliveries"])
			if tt.processed {
				require.NotEmpty(t, before["task_state"], "the first delivery made a task")
				require.NotEmpty(t, before["issues"], "the first delivery recorded its issue")
			}

			again := tt.sent[len(tt.sent)-1]
			assert.Equal(t, http.StatusOK, b.post(t, again, nil), "a delivery id seen before")
			if tt.processed {
				b.drain(t)
			}
			after := b.rows(t)
			require.ElementsMatch(t, keys(before), keys(after), "tables")
			for table, rows := range before {
				assert.Equal(t, rows, after[table], "rows of %s", table)
			}
		})
	}
}

// rows reads every row of every table of the bundle's database, each as
// JSON (a value longer than 200 characters, such as a stored body, as its
// MD5), in a stable order, by table.
func (b *bundle) rows(t *testing.T) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tables, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(tables, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, names)
	out := make(map[string][]string, len(names))
	for _, name := range names {
		rows, err := conn.Query(ctx, `SELECT COALESCE((SELECT jsonb_object_agg(k,
				CASE WHEN length(v::text) > 200 THEN to_jsonb('md5:' || md5(v::text)) ELSE v END)
			FROM jsonb_each(to_jsonb(x)) AS e(k, v)), '{}')::text AS r
			FROM `+pgx.Identifier{name}.Sanitize()+` x ORDER BY r`)
		require.NoError(t, err)
		out[name], err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
