-- +goose Up

-- One row per unit of agent work. Collaboration data (title, body, labels,
-- comments) stays in Gitea; this table holds what Gitea does not: execution state.
CREATE TABLE task_state (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    repo             TEXT        NOT NULL,
    issue_number     INTEGER     NOT NULL,
    pr_number        INTEGER,
    parent_issue     INTEGER,
    action_type      TEXT        NOT NULL,
    business_type    TEXT        NOT NULL DEFAULT '',
    agent            TEXT        NOT NULL,
    status           TEXT        NOT NULL DEFAULT 'pending',
    retry_count      INTEGER     NOT NULL DEFAULT 0,
    dispatch_count   INTEGER     NOT NULL DEFAULT 0,
    max_retries      INTEGER     NOT NULL DEFAULT 2,
    -- 0 is priority/P0 (most urgent) … 3 is priority/P3; claims order ascending.
    priority         SMALLINT    NOT NULL DEFAULT 2,
    depends_on       INTEGER[]   NOT NULL DEFAULT '{}',
    daemon_meta      JSONB       NOT NULL DEFAULT '{}',
    issue_body_cache TEXT        NOT NULL DEFAULT '',
    issue_updated_at TIMESTAMPTZ,
    -- Event identity that must never produce a second task, live or not
    -- (a CI failure per PR head SHA and context, a round review per round …).
    dedupe_key       TEXT,
    -- Length of the @mention chain that led to this task.
    hop_count        INTEGER     NOT NULL DEFAULT 0,
    not_before       TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Set while an agent process runs for the task; a lease that expires
    -- means its runner died and the ticker rescues the task.
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    heartbeat_at     TIMESTAMPTZ,
    last_error       TEXT        NOT NULL DEFAULT '',
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at      TIMESTAMPTZ,

    CONSTRAINT task_state_repo_check CHECK (repo ~ '^[^/[:space:]]+/[^/[:space:]]+$'),
    CONSTRAINT task_state_issue_check CHECK (issue_number > 0),
    CONSTRAINT task_state_agent_check CHECK (agent <> ''),
    CONSTRAINT task_state_status_check CHECK (status IN
        ('pending', 'claimed', 'working', 'review', 'done', 'failed', 'cancelled')),
    CONSTRAINT task_state_action_type_check CHECK (action_type IN
        ('issue_assigned', 'ci_failure', 'review_result', 'review_request', 'review_updated',
         'review_comment', 'mention', 'deploy_failure', 'infrastructure_failure',
         'issue_closed', 'review_merged', 'discussion', 'round_review')),
    CONSTRAINT task_state_business_type_check CHECK (business_type IN
        ('', 'feature', 'impl', 'bug', 'docs', 'refactor', 'test', 'infrastructure')),
    CONSTRAINT task_state_priority_check CHECK (priority BETWEEN 0 AND 3),
    CONSTRAINT task_state_retries_check CHECK (retry_count >= 0 AND max_retries >= 0),
    CONSTRAINT task_state_lease_check CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
);

-- At most one live task per (repo, issue, action, agent): a duplicate webhook
-- cannot create a second one, whatever the Go code does.
CREATE UNIQUE INDEX task_state_one_live_idx ON task_state (repo, issue_number, action_type, agent)
    WHERE status IN ('pending', 'claimed', 'working', 'review');

CREATE UNIQUE INDEX task_state_dedupe_idx ON task_state (repo, action_type, dedupe_key)
    WHERE dedupe_key IS NOT NULL;

-- Serves the dispatcher's claim: pending rows in priority order, oldest first.
CREATE INDEX task_state_claim_idx ON task_state (priority, not_before, id)
    WHERE status = 'pending';

CREATE INDEX task_state_issue_idx ON task_state (repo, issue_number);
CREATE INDEX task_state_pr_idx ON task_state (repo, pr_number) WHERE pr_number IS NOT NULL;
CREATE INDEX task_state_parent_idx ON task_state (repo, parent_issue) WHERE parent_issue IS NOT NULL;
CREATE INDEX task_state_lease_idx ON task_state (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE INDEX task_state_status_idx ON task_state (status, action_type);

-- One row per agent spawn.
CREATE TABLE task_attempts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     BIGINT      NOT NULL REFERENCES task_state (id) ON DELETE CASCADE,
    attempt     INTEGER     NOT NULL,
    agent       TEXT        NOT NULL,
    runner      TEXT        NOT NULL DEFAULT '',
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    exit_code   INTEGER,
    -- running, succeeded, failed, timeout, budget_exceeded, interrupted, rescued, spawn_error
    outcome     TEXT        NOT NULL DEFAULT 'running',
    error       TEXT        NOT NULL DEFAULT '',
    output_tail TEXT        NOT NULL DEFAULT '',
    log_path    TEXT        NOT NULL DEFAULT '',
    duration_ms BIGINT,
    tokens_in   BIGINT,
    tokens_out  BIGINT,
    cost_usd    NUMERIC(14, 6),
    UNIQUE (task_id, attempt)
);
CREATE INDEX task_attempts_started_idx ON task_attempts (started_at);

-- @mentions parsed from comments, consumed by the ticker.
CREATE TABLE mention_queue (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    repo         TEXT        NOT NULL,
    issue_number INTEGER     NOT NULL,
    comment_id   BIGINT      NOT NULL,
    author       TEXT        NOT NULL,
    mentioned    TEXT        NOT NULL,
    hop_count    INTEGER     NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    consumed_at  TIMESTAMPTZ,
    task_id      BIGINT      REFERENCES task_state (id) ON DELETE SET NULL,
    outcome      TEXT        NOT NULL DEFAULT '',
    UNIQUE (repo, comment_id, mentioned)
);
CREATE INDEX mention_queue_unconsumed_idx ON mention_queue (id) WHERE consumed_at IS NULL;

-- Durable inbox: a delivery is committed here before mozi answers 2xx.
CREATE TABLE webhook_deliveries (
    delivery_id     TEXT        PRIMARY KEY,
    event           TEXT        NOT NULL,
    event_type      TEXT        NOT NULL DEFAULT '',
    action          TEXT        NOT NULL DEFAULT '',
    repo            TEXT        NOT NULL DEFAULT '',
    headers         JSONB       NOT NULL DEFAULT '{}',
    body            BYTEA       NOT NULL,
    received_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    processed_at    TIMESTAMPTZ,
    -- '' while waiting; processed, duplicate, ignored or parked afterwards.
    outcome         TEXT        NOT NULL DEFAULT '',
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error      TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX webhook_deliveries_inbox_idx ON webhook_deliveries (next_attempt_at)
    WHERE processed_at IS NULL;
CREATE INDEX webhook_deliveries_received_idx ON webhook_deliveries (received_at);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE mention_queue;
DROP TABLE task_attempts;
DROP TABLE task_state;
