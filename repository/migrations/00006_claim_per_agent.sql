-- +goose Up
-- The claim reads each agent's due tasks in priority order.
CREATE INDEX task_state_claim_agent_idx ON task_state (agent, priority, not_before, id)
    WHERE status = 'pending';
DROP INDEX task_state_claim_idx;

-- +goose Down
CREATE INDEX task_state_claim_idx ON task_state (priority, not_before, id)
    WHERE status = 'pending';
DROP INDEX task_state_claim_agent_idx;
