-- +goose Up
-- A claimed task that is put back without running (a dependency still
-- open, Gitea unreachable, a budget spent, mozi stopping) is held: the
-- hold gives its claim back (dispatch_count counts runs and lost runners,
-- not holds) and counts here, so consecutive holds back off; a run resets it.
ALTER TABLE task_state ADD COLUMN holds INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE task_state DROP COLUMN holds;
