-- Why a task is dead, when whoever killed it said (issue 13, "Re-claim loops"): `loop` when a
-- runner quarantined it after a streak of claims that all failed (the runner library's
-- `Runner::quarantine_after`). Null: its attempts ran out, or the writer did not say.
-- Written only together with status = 'dead' (logged by tasks_log_death) and cleared by an
-- operator's re-queue (logged by its audit row), so it joins neither trigger list of 0008.
-- Parallel to migrations/postgres/0014_add_dead_reason.sql.
ALTER TABLE tasks ADD COLUMN dead_reason TEXT CHECK (dead_reason IN ('loop'));
