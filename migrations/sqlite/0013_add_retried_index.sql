-- Re-claim loops (issue 14): the candidates of the loop query, tasks still being retried that
-- were claimed at least LOOP_CLAIMS (3) times since re-queued (store/src/alerts.rs).
-- Parallel to migrations/postgres/0013_add_retried_index.sql.
CREATE INDEX IF NOT EXISTS tasks_retried_idx ON tasks (id) WHERE status IN ('queued', 'leased') AND attempts >= 3;
