-- +goose Up
-- What the periodic jobs, the metrics scrape and the list commands read must
-- not grow with history (docs/performance.md, "A year of history").

-- Finished tasks are counted as they finish, not by reading them all at
-- every scrape. Each change of a task into or out of a finished status, or
-- of a finished task's action type, adds a row of ±1 here (a trigger, so
-- whatever moves a task is counted, and concurrent transitions never wait
-- on one counter row); the ticker folds them into task_counts. Counts are
-- the sum of both: exact at any snapshot, whether folded or not.
CREATE TABLE task_counts (
    status      TEXT   NOT NULL,
    action_type TEXT   NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (status, action_type)
);
CREATE TABLE task_count_changes (
    status      TEXT    NOT NULL,
    action_type TEXT    NOT NULL,
    n           INTEGER NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION mozi_count_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.status IN ('done', 'failed', 'cancelled') THEN
        INSERT INTO task_count_changes VALUES (OLD.status, OLD.action_type, -1);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status IN ('done', 'failed', 'cancelled') THEN
        INSERT INTO task_count_changes VALUES (NEW.status, NEW.action_type, 1);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER task_state_count_insert AFTER INSERT ON task_state
    FOR EACH ROW WHEN (NEW.status IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION mozi_count_finished();
CREATE TRIGGER task_state_count_update AFTER UPDATE OF status, action_type ON task_state
    FOR EACH ROW WHEN ((OLD.status IN ('done', 'failed', 'cancelled') OR NEW.status IN ('done', 'failed', 'cancelled'))
        AND (OLD.status, OLD.action_type) IS DISTINCT FROM (NEW.status, NEW.action_type))
    EXECUTE FUNCTION mozi_count_finished();
CREATE TRIGGER task_state_count_delete AFTER DELETE ON task_state
    FOR EACH ROW WHEN (OLD.status IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION mozi_count_finished();
-- The triggers hold task_state against writers until this commits: the
-- count starts exact.
INSERT INTO task_counts (status, action_type, n)
SELECT status, action_type, count(*) FROM task_state
WHERE status IN ('done', 'failed', 'cancelled') GROUP BY status, action_type;

-- The rounds sweep reads the open parents whose round may be due down to
-- their sub-issues, not every open issue: issue_parents lists the issues
-- that have (or had) a sub-issue, whether they are open, and whether they
-- are settled: every sub-issue finished and that set reviewed, as the sweep
-- found (it settles them). Only a change of the set of sub-issues can make
-- a settled parent due again (a sub-issue reopened or given new work is
-- unfinished; finished again, the set is the one reviewed), so a sub-issue
-- saved under a parent, or moved away from one, unsettles it.
--
-- A sub-issue saved marks its parent open, whatever the parent's state
-- (read here, it could be a state another transaction is changing); the
-- parent's own saves, which its row lock orders, mark it open or closed;
-- the sweep marks closed a parent it finds closed or missing. Each of
-- these writes counts a change, and the sweep writes a mark (settled,
-- closed) only if no change came since it read it: a mark never says
-- closed while its issue is open.
CREATE TABLE issue_parents (
    repo    TEXT    NOT NULL,
    number  INTEGER NOT NULL,
    open    BOOLEAN NOT NULL,
    settled BOOLEAN NOT NULL DEFAULT false,
    changes BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (repo, number)
);
CREATE INDEX issue_parents_due_idx ON issue_parents (repo, number) WHERE open AND NOT settled;
-- +goose StatementBegin
CREATE FUNCTION mozi_issue_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.parent_issue IS NOT NULL
       AND (NEW.parent_issue IS DISTINCT FROM OLD.parent_issue OR NEW.is_pull <> OLD.is_pull) THEN
        UPDATE issue_parents SET settled = false, changes = changes + 1
        WHERE repo = OLD.repo AND number = OLD.parent_issue;
    END IF;
    IF NEW.parent_issue IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.parent_issue IS DISTINCT FROM OLD.parent_issue
                                         OR NEW.is_pull <> OLD.is_pull) THEN
        INSERT INTO issue_parents AS m (repo, number, open) VALUES (NEW.repo, NEW.parent_issue, true)
        ON CONFLICT (repo, number) DO UPDATE SET open = true, settled = false, changes = m.changes + 1;
    END IF;
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
        UPDATE issue_parents SET open = (NEW.state = 'open'), changes = changes + 1
        WHERE repo = NEW.repo AND number = NEW.number;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER issues_parent_insert AFTER INSERT ON issues
    FOR EACH ROW EXECUTE FUNCTION mozi_issue_parent();
CREATE TRIGGER issues_parent_update AFTER UPDATE OF parent_issue, is_pull, state ON issues
    FOR EACH ROW WHEN (NEW.parent_issue IS DISTINCT FROM OLD.parent_issue OR NEW.is_pull <> OLD.is_pull
        OR NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION mozi_issue_parent();
INSERT INTO issue_parents (repo, number, open)
SELECT DISTINCT s.repo, s.parent_issue, COALESCE(p.state = 'open', true)
FROM issues s LEFT JOIN issues p ON p.repo = s.repo AND p.number = s.parent_issue
WHERE s.parent_issue IS NOT NULL;

-- Due discussions: only rows the sweep would take are in the index, so an
-- issue assigned, closed, made a sub-issue or discussed leaves it.
CREATE INDEX issues_discussion_due_idx ON issues (discussion_due_at)
    WHERE discussion_due_at IS NOT NULL AND discussed_at IS NULL AND state = 'open'
      AND assignees = '{}' AND parent_issue IS NULL AND NOT is_pull;
DROP INDEX issues_discussion_idx;

-- The prune finds consumed mentions, kept commit statuses, and attempts
-- whose log is still kept, by time.
CREATE INDEX mention_queue_consumed_idx ON mention_queue (consumed_at) WHERE consumed_at IS NOT NULL;
CREATE INDEX commit_statuses_created_idx ON commit_statuses (created_at);
CREATE INDEX task_attempts_log_idx ON task_attempts (started_at) WHERE log_path <> '';

-- +goose Down
DROP INDEX task_attempts_log_idx;
DROP INDEX commit_statuses_created_idx;
DROP INDEX mention_queue_consumed_idx;
CREATE INDEX issues_discussion_idx ON issues (discussion_due_at)
    WHERE discussion_due_at IS NOT NULL AND discussed_at IS NULL;
DROP INDEX issues_discussion_due_idx;
DROP TRIGGER issues_parent_update ON issues;
DROP TRIGGER issues_parent_insert ON issues;
DROP FUNCTION mozi_issue_parent();
DROP TABLE issue_parents;
DROP TRIGGER task_state_count_delete ON task_state;
DROP TRIGGER task_state_count_update ON task_state;
DROP TRIGGER task_state_count_insert ON task_state;
DROP FUNCTION mozi_count_finished();
DROP TABLE task_count_changes;
DROP TABLE task_counts;
