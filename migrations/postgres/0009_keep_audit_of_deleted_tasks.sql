-- The audit trail outlives what it audits (issue 11, item 7). Deleting a task — by hand, or a
-- retention job that is not ours — must not erase who re-queued or compensated it, so
-- operator_actions keeps the task id without a foreign key (it cascaded before). `via` records
-- how the actor signed in (`session`, `token:<name>`, `proxy`, `cli`, `local`); rows from
-- before this migration have none. Refusals are recorded too, with outcome `refused:<code>`.
-- Parallel to migrations/sqlite/0009_keep_audit_of_deleted_tasks.sql.
ALTER TABLE operator_actions DROP CONSTRAINT IF EXISTS operator_actions_task_id_fkey;
ALTER TABLE operator_actions ADD COLUMN via TEXT;
