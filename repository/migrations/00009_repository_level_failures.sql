-- +goose Up
-- Deploy and infrastructure failures on commits no pull request explains
-- belong to the repository (issue_number 0): one per commit and context,
-- by their dedupe key. The one-live-task rule is for issues: on the
-- repository it let the first failure hide every later one.
DROP INDEX task_state_one_live_idx;
CREATE UNIQUE INDEX task_state_one_live_idx ON task_state (repo, issue_number, action_type, agent)
    WHERE status IN ('pending', 'claimed', 'working', 'review') AND issue_number > 0;

-- +goose Down
-- Keeps the newest live repository-level failure of each agent.
UPDATE task_state t SET status = 'cancelled', finished_at = now(), updated_at = now(),
        last_error = 'superseded: one live repository-level failure per agent'
    WHERE t.issue_number = 0 AND t.status IN ('pending', 'claimed', 'working', 'review')
      AND EXISTS (SELECT 1 FROM task_state n WHERE n.repo = t.repo AND n.issue_number = 0
                  AND n.action_type = t.action_type AND n.agent = t.agent AND n.id > t.id
                  AND n.status IN ('pending', 'claimed', 'working', 'review'));
DROP INDEX task_state_one_live_idx;
CREATE UNIQUE INDEX task_state_one_live_idx ON task_state (repo, issue_number, action_type, agent)
    WHERE status IN ('pending', 'claimed', 'working', 'review');
