-- Parallel to migrations/postgres/0009_keep_audit_of_deleted_tasks.sql, which says why: the
-- audit keeps a deleted task's id (no foreign key, so no cascade) and records `via`. SQLite
-- cannot drop a foreign key, so the table is rebuilt with the same rows, ids, indexes and
-- change-log triggers.
CREATE TABLE operator_actions_rebuilt (
    id                  INTEGER PRIMARY KEY,
    task_id             INTEGER NOT NULL,
    run_id              INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    action              TEXT NOT NULL,
    actor               TEXT NOT NULL,
    reason              TEXT NOT NULL,
    reference           TEXT,
    epoch_seen          INTEGER,
    epoch_after         INTEGER,
    status_seen         TEXT,
    outcome             TEXT NOT NULL,
    request_id          TEXT UNIQUE,
    created_at          TEXT NOT NULL,
    via                 TEXT
);
INSERT INTO operator_actions_rebuilt
    (id, task_id, run_id, action, actor, reason, reference, epoch_seen, epoch_after, status_seen,
     outcome, request_id, created_at)
SELECT id, task_id, run_id, action, actor, reason, reference, epoch_seen, epoch_after, status_seen,
       outcome, request_id, created_at
FROM operator_actions;
DROP TABLE operator_actions;
ALTER TABLE operator_actions_rebuilt RENAME TO operator_actions;

CREATE INDEX operator_actions_task_idx ON operator_actions (task_id, created_at DESC);
CREATE INDEX operator_actions_created_idx ON operator_actions (created_at DESC, id DESC);
CREATE INDEX operator_actions_actor_idx ON operator_actions (actor, created_at DESC);
CREATE INDEX operator_actions_action_idx ON operator_actions (action, created_at DESC, id DESC);

CREATE TRIGGER operator_actions_log_insert AFTER INSERT ON operator_actions BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('operator_actions', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER operator_actions_log_update AFTER UPDATE ON operator_actions BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('operator_actions', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
