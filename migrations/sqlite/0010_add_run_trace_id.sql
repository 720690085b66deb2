-- A run's trace elsewhere (issue 14, "Trace links"): optional, opaque, set by the runner library
-- when given one, turned into a link by `--trace-url-template`. Setting it is logged like the
-- other run columns, so an open page shows the link before the finish.
-- Parallel to migrations/postgres/0010_add_run_trace_id.sql.
ALTER TABLE runs ADD COLUMN trace_id TEXT;

DROP TRIGGER runs_log_update;
CREATE TRIGGER runs_log_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows,
        trace_id
    ON runs BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('runs', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
