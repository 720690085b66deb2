-- The change log behind live updates (GET /api/v1/events, docs/live.md).
--
-- Every insert or update of a contract table appends one row here, in the writer's own
-- transaction, so a change is logged exactly when it commits and never when it rolls back. The
-- log's id is the event id a browser resumes from (Last-Event-ID): ids come from the database,
-- so any dashboard server behind a load balancer can resume a browser that another one served.
-- Runners need not know about it: the triggers do the work (docs/contract.md, schema 0002).
--
-- Ids are taken when a row is written, not when its transaction commits, so two concurrent
-- writers can commit ids out of order (11 visible before 10). The dashboard's reader tracks such
-- gaps and only advances its resume point past an id once the transactions that might still
-- hold it have ended (server/src/live.rs).
--
-- Rows are pruned by the dashboard after about an hour (created_at is the database's clock,
-- used only for pruning); the newest row is always kept so the id sequence stays visible.

CREATE TABLE change_log (
    id          BIGSERIAL PRIMARY KEY,                 -- never reused: the resume cursor
    table_name  TEXT NOT NULL,                         -- 'tasks' | 'runs' | 'effects' | 'operator_actions'
    row_id      BIGINT NOT NULL,                       -- the id of the changed row in that table
    task_id     BIGINT,                                -- the task the row belongs to
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One function for the four tables. Each branch is its own statement because PL/pgSQL resolves
-- NEW.task_id when a statement first runs: referring to it on `tasks` would fail.
-- pg_notify is a wake-up call for the one listener in each dashboard process; its payload (the
-- new id) lets the listener skip a read it has already done. Notifications sent inside a
-- transaction are delivered only when it commits, and never if it rolls back, so a listener
-- woken by one always finds the row. The listener reads the rows from this table (a primary
-- key range scan), so a missed notification delays a change but never loses it.
CREATE FUNCTION lastword_log_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    change_id BIGINT;
BEGIN
    IF TG_TABLE_NAME = 'tasks' THEN
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.id)
        RETURNING id INTO change_id;
    ELSE
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.task_id)
        RETURNING id INTO change_id;
    END IF;
    PERFORM pg_notify('lastword_changes', change_id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER tasks_log_change AFTER INSERT OR UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER runs_log_change AFTER INSERT OR UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER effects_log_change AFTER INSERT OR UPDATE ON effects
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER operator_actions_log_change AFTER INSERT OR UPDATE ON operator_actions
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
