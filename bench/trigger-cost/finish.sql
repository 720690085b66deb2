-- The runner's finish (lastword_runner::sql::FINISH_SUCCESS_TASK and FINISH_RUN), each
-- transaction on the next leased task of the pool (ids 100001..300000).
SELECT nextval('finish_n') + 100000 AS n \gset
BEGIN;
UPDATE tasks SET status = 'completed', result = 'done', owner = NULL, lease_expires_at = NULL, updated_at = now() WHERE id = :n AND owner = 'w' AND lease_epoch = 1 RETURNING status;
UPDATE runs SET finished_at = now(), output = 'done', error = NULL, error_detail = NULL, completion_rows = 1 WHERE id = :n AND finished_at IS NULL;
COMMIT;
