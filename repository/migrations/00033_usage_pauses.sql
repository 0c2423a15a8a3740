-- +goose Up
-- An agent whose account (its provider credential) hit a usage limit is not
-- claimed for until the limit resets: one row per agent sharing that
-- credential. until far in the future: the daily cap of unattended resumes
-- was reached, and the agents wait for a person (mozi task resume).
CREATE TABLE agent_pauses (
    agent      TEXT        PRIMARY KEY,
    credential TEXT        NOT NULL,
    until      TIMESTAMPTZ NOT NULL,
    reason     TEXT        NOT NULL DEFAULT '',
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The unattended resumes of a credential on one day (UTC, the day of the
-- reset): each new reset time counts once, however many runs hit the same
-- limit.
CREATE TABLE credential_resumes (
    credential TEXT        PRIMARY KEY,
    day        DATE        NOT NULL,
    resumes    INTEGER     NOT NULL,
    until      TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE credential_resumes;
DROP TABLE agent_pauses;
