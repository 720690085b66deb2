-- Indexes for the dashboard's read queries (store/src/queries.rs). No table changes: the runner
-- contract (docs/contract.md) is unaffected. Parallel to migrations/sqlite/0003_add_dashboard_indexes.sql.

-- Empty-output failures by time: the predicate is the store's `state_predicate(EmptyOutput)`
-- verbatim, so the planner can prove a cause=empty_output filter implies it.
CREATE INDEX runs_empty_output_idx ON runs (claimed_at DESC, id DESC)
    WHERE finished_at IS NOT NULL AND (completion_rows IS NULL OR completion_rows <> 0) AND error IS NULL
      AND COALESCE(btrim(output, E' \t\n\r\x0B\x0C'), '') = '';
-- Timeline: runs claimed before the window that finished inside it.
CREATE INDEX runs_finished_idx ON runs (finished_at) WHERE finished_at IS NOT NULL;
-- Overview "needs attention": tasks with effects recorded in the window.
CREATE INDEX effects_created_idx ON effects (created_at);
