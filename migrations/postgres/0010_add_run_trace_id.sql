-- A run's trace elsewhere (issue 14, "Trace links"): agent runs are traced by Langfuse,
-- LangSmith or an OpenTelemetry backend, and the person paged about a failure wants that trace
-- one click from the run. `trace_id` is optional and opaque to lastword; the runner library sets
-- it when given one (at the claim, or as soon as the work has a trace), and the server turns it
-- into a link with `--trace-url-template` (docs/contract.md, "Trace ids").
--
-- Setting it is logged like any other run column (0008: a migration that adds a column decides
-- which list it belongs to), so an open page shows the link without waiting for the finish.
-- It is written at most once or twice per run, never by a heartbeat.
-- Parallel to migrations/sqlite/0010_add_run_trace_id.sql.
ALTER TABLE runs ADD COLUMN trace_id TEXT;

DROP TRIGGER runs_log_update ON runs;
CREATE TRIGGER runs_log_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows,
        trace_id
    ON runs FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
