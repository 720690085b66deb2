-- Live updates without a notification per row (issue 9: the runner's write throughput).
--
-- 0002's trigger called pg_notify for every logged row. PostgreSQL serialises the commits of
-- every notifying transaction on one global lock (the NOTIFY queue), so a fleet's heartbeats,
-- claims and finishes queued behind each other: measured, the runner's heartbeat loop ran at
-- 52–65 % of its speed without the triggers, and almost all of that was the notification (the
-- change_log insert itself costs little). A monitoring tool must not halve the capacity of what
-- it monitors.
--
-- From here the trigger only appends to change_log; each dashboard process follows the log by
-- primary key (one short index read every 100 ms, whatever the write rate: server/src/live.rs,
-- docs/live.md). The function keeps its name, so the four triggers of 0002 need no change.
-- Parallel to migrations/sqlite/0005_drop_change_notify.sql (SQLite never notified).
CREATE OR REPLACE FUNCTION lastword_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One statement per branch: PL/pgSQL resolves NEW.task_id when a statement first runs,
    -- and `tasks` has no such column.
    IF TG_TABLE_NAME = 'tasks' THEN
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.id);
    ELSE
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.task_id);
    END IF;
    RETURN NULL;
END;
$$;
