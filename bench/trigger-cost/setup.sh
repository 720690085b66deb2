#!/bin/bash
# Builds the database the trigger-cost measurement runs on (bench/trigger-cost/README.md):
# lastword's PostgreSQL migrations, 200 000 leased tasks with their unfinished runs for the
# finish loop, 2 M finished runs of history so the indexes of `runs` have a realistic depth,
# and the trigger variants the measurement compares, all disabled.
# Usage: bench/trigger-cost/setup.sh [DATABASE]   (default lastword_trigger_cost; ~1 minute)
set -euo pipefail
db=${1:-lastword_trigger_cost}
here=$(cd "$(dirname "$0")" && pwd)
P=(psql -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1)
"${P[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
for f in "$here"/../../migrations/postgres/*.sql; do "${P[@]}" -d "$db" -f "$f"; done
"${P[@]}" -d "$db" <<'SQL'
ALTER TABLE tasks DISABLE TRIGGER USER;
ALTER TABLE runs DISABLE TRIGGER USER;
-- The same logging, from BEFORE triggers (no after-trigger event queue).
CREATE FUNCTION lastword_log_change_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'tasks' THEN
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.id);
    ELSE
        INSERT INTO change_log (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.task_id);
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER tasks_logb_insert BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION lastword_log_change_before();
CREATE TRIGGER tasks_logb_update BEFORE UPDATE OF
        id, kind, source, safety, payload, max_attempts,
        compensated_at, compensated_by, compensation_reason, compensation_ref, created_at
    ON tasks FOR EACH ROW EXECUTE FUNCTION lastword_log_change_before();
CREATE TRIGGER tasks_logb_death BEFORE UPDATE OF status ON tasks
    FOR EACH ROW WHEN (NEW.status = 'dead' AND OLD.status <> 'dead')
    EXECUTE FUNCTION lastword_log_change_before();
CREATE TRIGGER runs_logb_insert BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION lastword_log_change_before();
CREATE TRIGGER runs_logb_update BEFORE UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows, trace_id
    ON runs FOR EACH ROW EXECUTE FUNCTION lastword_log_change_before();
-- The same logging into an UNLOGGED copy of the change log (no WAL for the insert or its
-- index): what the log's durability costs the finish.
CREATE UNLOGGED TABLE change_log_unlogged (LIKE change_log INCLUDING ALL);
CREATE FUNCTION lastword_log_change_unlogged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'tasks' THEN
        INSERT INTO change_log_unlogged (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.id);
    ELSE
        INSERT INTO change_log_unlogged (table_name, row_id, task_id) VALUES (TG_TABLE_NAME, NEW.id, NEW.task_id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER tasks_logu_death AFTER UPDATE OF status ON tasks
    FOR EACH ROW WHEN (NEW.status = 'dead' AND OLD.status <> 'dead')
    EXECUTE FUNCTION lastword_log_change_unlogged();
CREATE TRIGGER runs_logu_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows, trace_id
    ON runs FOR EACH ROW EXECUTE FUNCTION lastword_log_change_unlogged();
-- The AFTER triggers of `runs` with a body that does nothing: what firing them costs alone.
CREATE FUNCTION lastword_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END; $$;
CREATE TRIGGER runs_noop_insert AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION lastword_noop();
CREATE TRIGGER runs_noop_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows, trace_id
    ON runs FOR EACH ROW EXECUTE FUNCTION lastword_noop();
-- The run's update logged by a rule instead of a trigger: the rewriter adds the insert to the
-- statement as a second query (an index probe of the same row), so no row trigger fires. It
-- cannot be restricted to columns, so it compares every logged column of the row.
CREATE RULE runs_logr_update AS ON UPDATE TO runs
    WHERE NEW.id IS DISTINCT FROM OLD.id OR NEW.task_id IS DISTINCT FROM OLD.task_id
       OR NEW.worker IS DISTINCT FROM OLD.worker OR NEW.lease_epoch IS DISTINCT FROM OLD.lease_epoch
       OR NEW.claimed_at IS DISTINCT FROM OLD.claimed_at OR NEW.finished_at IS DISTINCT FROM OLD.finished_at
       OR NEW.output IS DISTINCT FROM OLD.output OR NEW.error IS DISTINCT FROM OLD.error
       OR NEW.error_detail IS DISTINCT FROM OLD.error_detail
       OR NEW.completion_rows IS DISTINCT FROM OLD.completion_rows OR NEW.trace_id IS DISTINCT FROM OLD.trace_id
    DO ALSO INSERT INTO change_log (table_name, row_id, task_id) VALUES ('runs', NEW.id, NEW.task_id);
ALTER TABLE runs DISABLE RULE runs_logr_update;
ALTER TABLE tasks DISABLE TRIGGER USER;
ALTER TABLE runs DISABLE TRIGGER USER;
INSERT INTO tasks (id, kind, source, safety, status, owner, lease_epoch, lease_expires_at, attempts, created_at, updated_at)
SELECT g, 'reply', 'notification', 'idempotent', 'leased', 'w', 1, now() + interval '1 day', 1, now(), now()
FROM generate_series(100001, 300000) g;
INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at)
SELECT g, g, 'w', 1, now(), now() + interval '1 day' FROM generate_series(100001, 300000) g;
INSERT INTO tasks (id, kind, source, safety, status, lease_epoch, attempts, created_at, updated_at)
SELECT g, 'reply', 'tick', 'idempotent', 'completed', 1, 1, now() - interval '10 days', now()
FROM generate_series(300001, 2300000) g;
INSERT INTO runs (id, task_id, worker, lease_epoch, claimed_at, lease_expires_at, finished_at, output, completion_rows)
SELECT g + 3000000, g, 'w' || (g % 200), 1, now() - (g % 864000) * interval '1 second', now(), now(), 'no action needed', 1
FROM generate_series(300001, 2300000) g;
CREATE SEQUENCE finish_n;
SQL
"${P[@]}" -d "$db" -c "VACUUM ANALYZE"
