-- +goose Up
-- Dedupe keys name the object their event is about. The old keys of
-- discussions ("discussion/<agent>"), merge notices ("merged") and close
-- notices ("closed@<time>") were unique per repository, so a second issue or
-- pull request got no task. Rewrite them so the tasks already made keep
-- blocking exactly their own object.
UPDATE task_state SET dedupe_key = 'discussion#' || issue_number || '/' || lower(substr(dedupe_key, 12))
    WHERE action_type = 'discussion' AND dedupe_key LIKE 'discussion/%';
UPDATE task_state SET dedupe_key = 'merged#' || issue_number
    WHERE action_type = 'review_merged' AND dedupe_key = 'merged';
UPDATE task_state SET dedupe_key = 'closed#' || issue_number || '@' || substr(dedupe_key, 8)
    WHERE action_type = 'issue_closed' AND dedupe_key LIKE 'closed@%';
UPDATE task_state SET dedupe_key = 'round#' || issue_number || ':' || substr(dedupe_key, 7)
    WHERE action_type = 'round_review' AND dedupe_key LIKE 'round:%';
UPDATE task_state SET dedupe_key = 'ci#' || dedupe_key
    WHERE action_type = 'ci_failure' AND dedupe_key ~ '^[0-9]+/';
UPDATE task_state SET dedupe_key = 'commit@' || dedupe_key
    WHERE action_type IN ('deploy_failure', 'infrastructure_failure') AND dedupe_key NOT LIKE 'commit@%';

-- +goose Down
-- The old keys could hold one task per repository: the oldest keeps its
-- old key, the others lose theirs (they are finished or about to be).
UPDATE task_state t SET dedupe_key = CASE WHEN t.id = (
        SELECT min(o.id) FROM task_state o WHERE o.repo = t.repo AND o.action_type = 'discussion'
          AND split_part(o.dedupe_key, '/', 2) = split_part(t.dedupe_key, '/', 2) AND o.dedupe_key LIKE 'discussion#%')
    THEN 'discussion/' || split_part(t.dedupe_key, '/', 2) END
    WHERE t.action_type = 'discussion' AND t.dedupe_key LIKE 'discussion#%';
UPDATE task_state t SET dedupe_key = CASE WHEN t.id = (
        SELECT min(o.id) FROM task_state o WHERE o.repo = t.repo AND o.action_type = 'review_merged'
          AND o.dedupe_key LIKE 'merged#%')
    THEN 'merged' END
    WHERE t.action_type = 'review_merged' AND t.dedupe_key LIKE 'merged#%';
UPDATE task_state t SET dedupe_key = CASE WHEN t.id = (
        SELECT min(o.id) FROM task_state o WHERE o.repo = t.repo AND o.action_type = 'issue_closed'
          AND split_part(o.dedupe_key, '@', 2) = split_part(t.dedupe_key, '@', 2) AND o.dedupe_key LIKE 'closed#%')
    THEN 'closed@' || split_part(t.dedupe_key, '@', 2) END
    WHERE t.action_type = 'issue_closed' AND t.dedupe_key LIKE 'closed#%';
UPDATE task_state SET dedupe_key = 'round:' || split_part(dedupe_key, ':', 2)
    WHERE action_type = 'round_review' AND dedupe_key LIKE 'round#%';
UPDATE task_state SET dedupe_key = substr(dedupe_key, 4)
    WHERE action_type = 'ci_failure' AND dedupe_key LIKE 'ci#%';
UPDATE task_state SET dedupe_key = substr(dedupe_key, 8)
    WHERE action_type IN ('deploy_failure', 'infrastructure_failure') AND dedupe_key LIKE 'commit@%';
