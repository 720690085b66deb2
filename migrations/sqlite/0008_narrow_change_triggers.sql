-- A runner's transaction logs one row, and a heartbeat none: parallel to
-- migrations/postgres/0008_narrow_change_triggers.sql, which says why, which columns, and what
-- it measured. The update triggers of 0002 on `tasks` and `runs` are recreated restricted to
-- columns, plus the two that test a value (a task's death, a lapsed run that beats again).
DROP TRIGGER tasks_log_update;
CREATE TRIGGER tasks_log_update AFTER UPDATE OF
        id, kind, source, safety, payload, max_attempts,
        compensated_at, compensated_by, compensation_reason, compensation_ref, created_at
    ON tasks BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('tasks', NEW.id, NEW.id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER tasks_log_death AFTER UPDATE OF status ON tasks
    WHEN NEW.status = 'dead' AND OLD.status <> 'dead' BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('tasks', NEW.id, NEW.id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;

DROP TRIGGER runs_log_update;
CREATE TRIGGER runs_log_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows
    ON runs BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('runs', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER runs_log_revival AFTER UPDATE OF heartbeat_at ON runs
    WHEN OLD.finished_at IS NULL AND NEW.heartbeat_at >= OLD.lease_expires_at BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('runs', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
