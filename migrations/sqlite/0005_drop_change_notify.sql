-- Parallel to migrations/postgres/0005_drop_change_notify.sql, which removes the per-row
-- pg_notify from PostgreSQL's change-log trigger. SQLite's triggers (0002) never notified: the
-- dashboard always polled the log here, and now does so on PostgreSQL too. Nothing to change;
-- the migration exists so both databases carry the same numbered history.
SELECT 1;
