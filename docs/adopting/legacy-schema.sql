-- The "before" of docs/adopting.md: a typical home-grown job queue on PostgreSQL, the schema the
-- worked example starts from (and clients/python/tests/test_adopting.py creates). Not part of
-- lastword; yours will differ in names, but usually not in shape.
--
-- Its runner claims with
--   UPDATE jobs SET state = 'running', locked_by = $me, locked_until = now() + interval '5 minutes',
--                   attempts = attempts + 1, updated_at = now()
--   WHERE id = (SELECT id FROM jobs WHERE state = 'pending'
--                  OR (state = 'running' AND locked_until < now())
--               ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
-- and finishes with an unguarded UPDATE jobs SET state = 'done' | 'pending' | 'error' WHERE id = $id
-- (error once attempts reach MAX_ATTEMPTS = 3, a constant in its code). No fencing token, so a
-- worker whose lock was taken over still writes its result; blank results mean "nothing to do".

CREATE TABLE jobs (
    id           BIGSERIAL PRIMARY KEY,
    job_type     TEXT NOT NULL,
    payload      JSONB NOT NULL DEFAULT '{}'::jsonb,
    state        TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'error')),
    locked_by    TEXT,                  -- the worker holding the lock; cleared when it finishes
    locked_until TIMESTAMPTZ,           -- extended by the worker while it works
    attempts     INT NOT NULL DEFAULT 0,
    last_error   TEXT,                  -- the most recent attempt's error text
    result       TEXT,                  -- the last finished attempt's result; NULL or '' = nothing to do
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX jobs_claim_idx ON jobs (id) WHERE state IN ('pending', 'running');

-- Added a while after jobs: older jobs have no rows here.
CREATE TABLE job_attempts (
    id          BIGSERIAL PRIMARY KEY,
    job_id      BIGINT NOT NULL REFERENCES jobs (id),
    attempt     INT NOT NULL,           -- jobs.attempts after this attempt's claim: 1, 2, ...
    worker      TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,            -- NULL: the worker never came back
    outcome     TEXT CHECK (outcome IN ('done', 'error')),
    result      TEXT,
    error       TEXT,
    UNIQUE (job_id, attempt)
);
