-- Acknowledgements (issue 14, "Acknowledge and hand over"): an operator takes an attention item
-- of a task (a double execution awaiting compensation, an unsafe task's lost lease, a dead
-- task) with a note, and everyone sees it taken. An acknowledgement is an operator action like
-- the others (`action = 'acknowledge'`, its note in `reason`, audited, refusals recorded);
-- `attention` names the item. NULL on every other action.
-- Parallel to migrations/sqlite/0011_add_acknowledgements.sql.
ALTER TABLE operator_actions ADD COLUMN attention TEXT;
