-- A bucket whose recount is costly is recounted at most every so often, not at every refresh
-- (issue 9: what lastword costs the database the runner writes to; docs/counts.md, "Costly
-- buckets"). A rollup refresh recounts a changed bucket whole, so a fleet that finishes
-- thousands of runs a second inside one past quarter-hour had the dashboard recount all of its
-- runs every two seconds.
-- - `recount_ms`: how long the bucket's last recount took.
-- - `changed_at`: when a change to the bucket was read but its recount put off; null once it
--   is recounted. Readers keep using the bucket meanwhile: its `computed_at` is the
--   `counted_at` their answers show.
-- Parallel to migrations/postgres/0015_defer_costly_recounts.sql.
ALTER TABLE run_rollup_buckets ADD COLUMN recount_ms INTEGER;
ALTER TABLE run_rollup_buckets ADD COLUMN changed_at TEXT;
CREATE INDEX run_rollup_buckets_changed_idx ON run_rollup_buckets (changed_at) WHERE changed_at IS NOT NULL;
