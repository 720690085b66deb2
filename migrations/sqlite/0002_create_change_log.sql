-- The change log behind live updates, SQLite dialect. Parallel to
-- migrations/postgres/0002_create_change_log.sql: same table, same triggers, no NOTIFY (the
-- dashboard polls this table by primary key, which costs next to nothing).
--
-- AUTOINCREMENT so an id is never reused, even after pruning: it is the cursor a browser
-- resumes from. SQLite has one writer at a time, so ids also commit in order.
--
-- created_at is the one timestamp in the schema not bound from Rust: a trigger has no
-- parameters, so it takes SQLite's clock, written in the same RFC 3339 UTC text form as every
-- other timestamp. It is only used to prune rows older than about an hour.

CREATE TABLE change_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name  TEXT NOT NULL,
    row_id      INTEGER NOT NULL,
    task_id     INTEGER,
    created_at  TEXT NOT NULL
);

CREATE TRIGGER tasks_log_insert AFTER INSERT ON tasks BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('tasks', NEW.id, NEW.id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER tasks_log_update AFTER UPDATE ON tasks BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('tasks', NEW.id, NEW.id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;

CREATE TRIGGER runs_log_insert AFTER INSERT ON runs BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('runs', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER runs_log_update AFTER UPDATE ON runs BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('runs', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;

CREATE TRIGGER effects_log_insert AFTER INSERT ON effects BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('effects', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER effects_log_update AFTER UPDATE ON effects BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('effects', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;

CREATE TRIGGER operator_actions_log_insert AFTER INSERT ON operator_actions BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('operator_actions', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
CREATE TRIGGER operator_actions_log_update AFTER UPDATE ON operator_actions BEGIN
    INSERT INTO change_log (table_name, row_id, task_id, created_at)
    VALUES ('operator_actions', NEW.id, NEW.task_id, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'));
END;
