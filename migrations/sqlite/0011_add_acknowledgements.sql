-- Acknowledgements (issue 14): `operator_actions.attention` names the item an `acknowledge`
-- action took (`double_execution`, `unsafe_lost_lease`, `dead`); NULL on other actions.
-- Parallel to migrations/postgres/0011_add_acknowledgements.sql.
ALTER TABLE operator_actions ADD COLUMN attention TEXT;
