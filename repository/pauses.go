package repository

import (
	"context"
	"fmt"
	"time"
)

// Pause is a usage limit a credential hit: the agents that share it are
// not claimed for until Until.
type Pause struct {
	Credential string
	Agents     []string
	Until      time.Time
	Reason     string
	// Counted: the pause ends at a reset the provider gave, an unattended
	// resume the daily cap counts; a backoff is not counted.
	Counted bool
}

// PauseCredential records p for each of its agents (a later until wins)
// and returns how many unattended resumes the credential has on the day
// (UTC) of p.Until, this one included when counted: each new reset time
// counts once, however many runs hit the same limit.
func (q *Queries) PauseCredential(ctx context.Context, p Pause) (int, error) {
	var resumes int
	err := q.db.QueryRow(ctx, `WITH paused AS (
			INSERT INTO agent_pauses AS p (agent, credential, until, reason)
			SELECT a, $1, $3, $4 FROM unnest($2::text[]) AS a
			ON CONFLICT (agent) DO UPDATE SET credential = EXCLUDED.credential,
				until = GREATEST(p.until, EXCLUDED.until), reason = EXCLUDED.reason, updated_at = now()
		), counted AS (
			INSERT INTO credential_resumes AS c (credential, day, resumes, until)
			SELECT $1, ($3::timestamptz AT TIME ZONE 'UTC')::date, 1, $3 WHERE $5
			ON CONFLICT (credential) DO UPDATE SET
				resumes = CASE WHEN c.day <> EXCLUDED.day THEN 1
					WHEN EXCLUDED.until > c.until THEN c.resumes + 1 ELSE c.resumes END,
				day = EXCLUDED.day, until = GREATEST(c.until, EXCLUDED.until)
			RETURNING resumes
		)
		SELECT COALESCE((SELECT resumes FROM counted), (SELECT resumes FROM credential_resumes
			WHERE credential = $1 AND day = ($3::timestamptz AT TIME ZONE 'UTC')::date), 0)`,
		p.Credential, p.Agents, p.Until, p.Reason, p.Counted).Scan(&resumes)
	if err != nil {
		return 0, fmt.Errorf("pause the agents of a credential: %w", err)
	}
	return resumes, nil
}

// AgentPause is an agent not claimed for until Until.
type AgentPause struct {
	Agent      string
	Credential string
	Until      time.Time
	Reason     string
}

// AgentPauses lists the agents paused now.
func (q *Queries) AgentPauses(ctx context.Context) ([]AgentPause, error) {
	rows, err := q.db.Query(ctx, `SELECT agent, credential, until, reason FROM agent_pauses
		WHERE until > now() ORDER BY agent`)
	if err != nil {
		return nil, fmt.Errorf("list agent pauses: %w", err)
	}
	defer rows.Close()
	var out []AgentPause
	for rows.Next() {
		var p AgentPause
		if err := rows.Scan(&p.Agent, &p.Credential, &p.Until, &p.Reason); err != nil {
			return nil, fmt.Errorf("list agent pauses: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent pauses: %w", err)
	}
	return out, nil
}

// ResumeHeld is a person's answer to a task held for a usage limit past
// the daily cap: the task is due now, its agent's credential is no longer
// paused and its count of unattended resumes starts again. It reports
// whether the task was held for a usage limit.
func (q *Queries) ResumeHeld(ctx context.Context, id int64) (bool, error) {
	var resumed bool
	err := q.db.QueryRow(ctx, `WITH t AS (
			UPDATE task_state SET not_before = now(), held_for = '', updated_at = now()
			WHERE id = $1 AND status = 'pending' AND held_for = 'usage_limit'
			RETURNING agent
		), cred AS (
			SELECT p.credential FROM agent_pauses p JOIN t ON p.agent = t.agent
		), unpaused AS (
			DELETE FROM agent_pauses WHERE credential IN (SELECT credential FROM cred)
		), uncounted AS (
			DELETE FROM credential_resumes WHERE credential IN (SELECT credential FROM cred)
		)
		SELECT EXISTS (SELECT 1 FROM t)`, id).Scan(&resumed)
	if err != nil {
		return false, fmt.Errorf("resume task %d: %w", id, err)
	}
	return resumed, nil
}
