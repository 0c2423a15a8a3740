-- +goose Up

-- Deploy and infrastructure failures on a commit that no pull request
-- explains belong to the repository, not to an issue: issue_number 0.
ALTER TABLE task_state DROP CONSTRAINT task_state_issue_check;
ALTER TABLE task_state ADD CONSTRAINT task_state_issue_check CHECK (issue_number > 0
    OR (issue_number = 0 AND action_type IN ('deploy_failure', 'infrastructure_failure')));

-- Arrival order of deliveries (received_at is per transaction, so a group
-- commit gives many deliveries the same one).
ALTER TABLE webhook_deliveries ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;
ALTER TABLE webhook_deliveries ADD COLUMN semantic_key TEXT;
DROP INDEX webhook_deliveries_inbox_idx;
CREATE INDEX webhook_deliveries_inbox_idx ON webhook_deliveries (seq)
    WHERE processed_at IS NULL AND outcome = '';
CREATE INDEX webhook_deliveries_parked_idx ON webhook_deliveries (received_at)
    WHERE outcome = 'parked';

-- The effect of an event happens once, whatever delivered it: Gitea's
-- "Replay" (new delivery id), a repository and an organisation hook, …
CREATE TABLE webhook_effects (
    semantic_key TEXT        PRIMARY KEY,
    delivery_id  TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_effects_created_idx ON webhook_effects (created_at);

-- What mozi knows of each Gitea issue and pull request, from webhooks and
-- API reads: the collaboration data that task prompts and event mapping
-- need, cached. gitea_updated_at orders competing payloads.
CREATE TABLE issues (
    repo              TEXT        NOT NULL,
    number            INTEGER     NOT NULL,
    is_pull           BOOLEAN     NOT NULL DEFAULT false,
    title             TEXT        NOT NULL DEFAULT '',
    body              TEXT        NOT NULL DEFAULT '',
    state             TEXT        NOT NULL DEFAULT 'open',
    author            TEXT        NOT NULL DEFAULT '',
    labels            TEXT[]      NOT NULL DEFAULT '{}',
    assignees         TEXT[]      NOT NULL DEFAULT '{}',
    parent_issue      INTEGER,
    depends_on        INTEGER[]   NOT NULL DEFAULT '{}',
    gitea_created_at  TIMESTAMPTZ,
    gitea_updated_at  TIMESTAMPTZ,
    closed_at         TIMESTAMPTZ,
    closed_by         TEXT        NOT NULL DEFAULT '',
    -- Unassigned top-level issues get one discussion broadcast when due.
    discussion_due_at TIMESTAMPTZ,
    discussed_at      TIMESTAMPTZ,
    synced_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (repo, number),
    CONSTRAINT issues_state_check CHECK (state IN ('open', 'closed'))
);
CREATE INDEX issues_parent_idx ON issues (repo, parent_issue) WHERE parent_issue IS NOT NULL;
CREATE INDEX issues_discussion_idx ON issues (discussion_due_at)
    WHERE discussion_due_at IS NOT NULL AND discussed_at IS NULL;

CREATE TABLE pull_requests (
    repo                 TEXT        NOT NULL,
    number               INTEGER     NOT NULL,
    author               TEXT        NOT NULL DEFAULT '',
    title                TEXT        NOT NULL DEFAULT '',
    head_ref             TEXT        NOT NULL DEFAULT '',
    head_sha             TEXT        NOT NULL DEFAULT '',
    base_ref             TEXT        NOT NULL DEFAULT '',
    state                TEXT        NOT NULL DEFAULT 'open',
    merged               BOOLEAN     NOT NULL DEFAULT false,
    merged_by            TEXT        NOT NULL DEFAULT '',
    -- Issues the PR closes, as owner/name#N.
    linked_issues        TEXT[]      NOT NULL DEFAULT '{}',
    -- Reviewers whose latest verdict asked for changes.
    changes_requested_by TEXT[]      NOT NULL DEFAULT '{}',
    gitea_updated_at     TIMESTAMPTZ,
    closed_at            TIMESTAMPTZ,
    synced_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (repo, number),
    CONSTRAINT pull_requests_state_check CHECK (state IN ('open', 'closed'))
);
CREATE INDEX pull_requests_head_idx ON pull_requests (repo, head_sha);

-- Failing commit statuses whose commit is not (yet) a tracked PR head: a
-- status event can arrive before the PR event that names its SHA.
CREATE TABLE commit_statuses (
    repo        TEXT        NOT NULL,
    status_id   BIGINT      NOT NULL,
    sha         TEXT        NOT NULL,
    context     TEXT        NOT NULL,
    state       TEXT        NOT NULL,
    target_url  TEXT        NOT NULL DEFAULT '',
    description TEXT        NOT NULL DEFAULT '',
    sender      TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    matched_at  TIMESTAMPTZ,
    PRIMARY KEY (repo, status_id)
);
CREATE INDEX commit_statuses_unmatched_idx ON commit_statuses (repo, sha) WHERE matched_at IS NULL;

-- +goose Down
ALTER TABLE task_state DROP CONSTRAINT task_state_issue_check;
ALTER TABLE task_state ADD CONSTRAINT task_state_issue_check CHECK (issue_number > 0);
DROP TABLE commit_statuses;
DROP TABLE pull_requests;
DROP TABLE issues;
DROP TABLE webhook_effects;
DROP INDEX webhook_deliveries_parked_idx;
DROP INDEX webhook_deliveries_inbox_idx;
ALTER TABLE webhook_deliveries DROP COLUMN semantic_key;
ALTER TABLE webhook_deliveries DROP COLUMN seq;
CREATE INDEX webhook_deliveries_inbox_idx ON webhook_deliveries (next_attempt_at)
    WHERE processed_at IS NULL;
