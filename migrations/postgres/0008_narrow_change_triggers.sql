-- A runner's transaction logs one row, and a heartbeat none (issue 9: what lastword costs the
-- runner it watches).
--
-- A heartbeat is most of a fleet's writes (one per run every few seconds, against one claim and
-- one finish per run) and changes nothing the dashboard counts: it extends a lease that has not
-- lapsed. Measured with pgbench (the runner's heartbeat transaction, 8 clients, 100 k leased
-- tasks, alternating on one database): 0002's triggers cost it 9-12 % of its throughput, and
-- the same triggers with a WHEN clause that skips heartbeats still cost about 6 %, because
-- PostgreSQL still prepares every row for an AFTER trigger before testing it. A trigger
-- restricted to columns (`AFTER UPDATE OF …`) is tested against the statement's SET list once,
-- so a statement that sets only lease columns costs nothing: 1.00 of the throughput without
-- triggers in the same runs.
--
-- A claim and a finish each write the task and its run, and logged both. The run's row carries
-- the task's id, which is all any reader of the log uses (pages match changes by task; the
-- rollups recount by task and by run), so a runner's transaction now logs one row, its run's:
-- half the log every dashboard process follows, reads for its rollups and prunes. (The
-- runner's own finish loop did not move measurably with it: one AFTER-trigger row and insert
-- costs it about as much as two, BENCHMARKS.md.)
-- - `runs`: every insert, and an update naming any column but the lease's (`heartbeat_at`,
--   `lease_expires_at`): a claim inserts the run, a finish updates it. A heartbeat sets only
--   those two and is logged only when it beats at or after the lease it extends
--   (`runs_log_revival`): a silent run that beats again is running again.
-- - `tasks`: every insert (enqueue), an update naming a column the runner's statements never
--   set (compensation, the task's definition), and a task's death (`tasks_log_death`), because
--   a claim that finds a candidate out of attempts marks it dead without writing a run. What the
--   runner sets on a task (status, owner, epoch, attempts, lease, result) comes with a run
--   write in the same transaction (docs/contract.md); an operator's re-queue with its audit row.
-- A migration that adds a column to `tasks` or `runs` must decide which list it belongs to.
--
-- What the dashboard does without heartbeats in the live feed: a page that shows a lease
-- refetches shortly before the earliest lease it shows lapses (and just after, if it was not
-- extended), so it learns of the extension or shows the lapse on time (app/src/live.rs,
-- docs/live.md); the rollups recount a bucket when a lease it counted as running would have
-- lapsed (`stale_at`, docs/counts.md), so an extension is never counted wrong.
-- Parallel to migrations/sqlite/0008_narrow_change_triggers.sql.
DROP TRIGGER tasks_log_change ON tasks;
CREATE TRIGGER tasks_log_insert AFTER INSERT ON tasks
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER tasks_log_update AFTER UPDATE OF
        id, kind, source, safety, payload, max_attempts,
        compensated_at, compensated_by, compensation_reason, compensation_ref, created_at
    ON tasks FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER tasks_log_death AFTER UPDATE OF status ON tasks
    FOR EACH ROW WHEN (NEW.status = 'dead' AND OLD.status <> 'dead')
    EXECUTE FUNCTION lastword_log_change();

DROP TRIGGER runs_log_change ON runs;
CREATE TRIGGER runs_log_insert AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER runs_log_update AFTER UPDATE OF
        id, task_id, worker, lease_epoch, claimed_at, finished_at, output, error, error_detail, completion_rows
    ON runs FOR EACH ROW EXECUTE FUNCTION lastword_log_change();
CREATE TRIGGER runs_log_revival AFTER UPDATE OF heartbeat_at ON runs
    FOR EACH ROW WHEN (OLD.finished_at IS NULL AND NEW.heartbeat_at >= OLD.lease_expires_at)
    EXECUTE FUNCTION lastword_log_change();
