-- Parallel to migrations/postgres/0007_add_claimable_index.sql, which gives PostgreSQL's claim
-- an index of the claimable tasks in id order. SQLite's claim (`sql::sqlite::CLAIM_CANDIDATE`)
-- already reads only claimable tasks, through the two partial indexes of 0001. Nothing to
-- change; the migration exists so both databases carry the same numbered history.
SELECT 1;
