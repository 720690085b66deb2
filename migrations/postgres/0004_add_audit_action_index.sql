-- The Audit page filtered by action (store/src/queries.rs `audit`): newest first within one
-- action, without walking every other action's rows. Actor and time already have indexes (0001).
-- Parallel to migrations/sqlite/0004_add_audit_action_index.sql.
CREATE INDEX operator_actions_action_idx ON operator_actions (action, created_at DESC, id DESC);
