-- Step 2 of docs/adopting.md, for a legacy queue whose table is itself called `tasks`: moves it
-- out of the way of lastword's, which `lastword migrate` creates with a plain CREATE TABLE and
-- refuses to start without ("relation "tasks" already exists"). Renaming a table does not rename
-- its indexes, and lastword's migration 0001 names its own (tasks_owner_idx, tasks_queued_idx,
-- ...), which are unique per schema, so the indexes get the prefix too. Implicit names
-- (tasks_pkey, tasks_id_seq) would not clash (PostgreSQL picks free ones), but are renamed
-- alike so the legacy objects read as one set. Tested by clients/python/tests/test_adopting.py.
-- Do the same for a legacy `runs` or `effects` table.
DO $$
DECLARE
    index_name TEXT;
BEGIN
    ALTER TABLE tasks RENAME TO legacy_tasks;
    FOR index_name IN
        SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'legacy_tasks'::regclass AND c.relname NOT LIKE 'legacy\_%'
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', index_name, 'legacy_' || index_name);
    END LOOP;
END $$;
