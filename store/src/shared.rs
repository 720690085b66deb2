//! The [`Store`](crate::Store) methods whose SQL is the same on both backends, written once and
//! compiled once per backend by [`impl_store!`]. Each backend module supplies its dialect in a
//! `dialect` module (`STATE_SQL`) and invokes the macro on its store type; sqlx type-checks the
//! bodies against each driver separately, so a type that decodes on one backend only fails to
//! compile rather than at run time.

/// Parameters `$1..$3` of every query that selects a run's state: the twin of
/// `lastword_core::run_state` needs `now` and the two tokens, and always finds them there.
macro_rules! bind_state_params {
    ($query:expr, $now:expr, $tokens:expr) => {
        $query
            .bind($now)
            .bind(lastword_core::trim_token(&$tokens.no_action).to_string())
            .bind(lastword_core::trim_token(&$tokens.skip).to_string())
    };
}
pub(crate) use bind_state_params;

macro_rules! impl_store {
    ($store:ident, $backend:expr, $db_variant:ident) => {
        #[async_trait::async_trait]
        impl $crate::Store for $store {
            fn backend(&self) -> $crate::Backend {
                $backend
            }

            fn db(&self) -> &$crate::Db {
                &self.db
            }

            fn tokens(&self) -> &lastword_core::Tokens {
                &self.tokens
            }

            async fn readiness(&self) -> $crate::Readiness {
                let reachable = sqlx::query("SELECT 1").execute(&self.pool).await.is_ok();
                if !reachable {
                    return $crate::Readiness { reachable, pending_migrations: vec![] };
                }
                let applied: Vec<i64> =
                    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                        .fetch_all(&self.pool)
                        .await
                        .unwrap_or_default();
                let pending_migrations =
                    self.db.migrator().iter().map(|m| m.version).filter(|v| !applied.contains(v)).collect();
                $crate::Readiness { reachable, pending_migrations }
            }

            #[tracing::instrument(skip(self), err)]
            async fn totals(&self) -> Result<lastword_core::Totals, $crate::StoreError> {
                let estimates: Vec<(String, i64)> = match dialect::DIALECT.row_estimates {
                    Some(sql) => sqlx::query_as(sql).fetch_all(&self.pool).await?,
                    None => Vec::new(),
                };
                let mut counted = [0i64; 3];
                let mut estimated = false;
                for (slot, table) in counted.iter_mut().zip(["tasks", "runs", "effects"]) {
                    let large = estimates
                        .iter()
                        .find(|(t, _)| t == table)
                        .map(|(_, n)| *n)
                        .filter(|n| *n >= $crate::queries::EXACT_TOTALS_BELOW);
                    *slot = match large {
                        Some(n) => {
                            estimated = true;
                            n
                        }
                        // The table name is one of the three literals above, never input.
                        None => {
                            sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                                .fetch_one(&self.pool)
                                .await?
                        }
                    };
                }
                let [tasks, runs, effects] = counted;
                Ok(lastword_core::Totals { tasks, runs, effects, estimated })
            }

            #[tracing::instrument(skip(self), err)]
            async fn task(&self, id: i64) -> Result<Option<lastword_core::Task>, $crate::StoreError> {
                let row: Option<$crate::rows::TaskRow> = sqlx::query_as(&$crate::queries::task_by_id())
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(Into::into))
            }

            #[tracing::instrument(skip(self), err)]
            async fn run(
                &self,
                id: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<lastword_core::Run>, $crate::StoreError> {
                let sql = format!(
                    "SELECT {}, {} AS state, {} AS reclaim_reason FROM runs r WHERE r.id = $4",
                    $crate::rows::RUN_COLUMNS,
                    dialect::STATE_SQL,
                    $crate::queries::RECLAIM_REASON_SQL
                );
                let query = sqlx::query_as::<_, $crate::rows::RunRow>(&sql);
                let row = $crate::shared::bind_state_params!(query, now, self.tokens)
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                Ok(row.map(Into::into))
            }

            #[tracing::instrument(skip(self), err)]
            async fn task_runs(
                &self,
                task_id: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<lastword_core::Run>, $crate::StoreError> {
                let buf = $crate::queries::task_runs(&dialect::DIALECT, task_id, now, &self.tokens);
                let query = sqlx::query_as::<_, $crate::rows::RunRow>(&buf.sql);
                let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            #[tracing::instrument(skip(self), err)]
            async fn task_effects(
                &self,
                task_id: i64,
            ) -> Result<Vec<lastword_core::Effect>, $crate::StoreError> {
                let rows: Vec<$crate::rows::EffectRow> = sqlx::query_as(&$crate::queries::task_effects())
                    .bind(task_id)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            #[tracing::instrument(skip(self), err)]
            async fn task_actions(
                &self,
                task_id: i64,
            ) -> Result<Vec<lastword_core::OperatorAction>, $crate::StoreError> {
                let rows: Vec<$crate::rows::ActionRow> = sqlx::query_as(&$crate::queries::task_actions())
                    .bind(task_id)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            #[tracing::instrument(skip(self), err)]
            async fn list_runs(
                &self,
                filter: &lastword_core::RunFilter,
                page: &lastword_core::PageRequest,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<lastword_core::RunPage, $crate::StoreError> {
                let buf = $crate::queries::list_runs(&dialect::DIALECT, filter, page, now, &self.tokens);
                let query = sqlx::query_as::<_, $crate::rows::RunListRow>(&buf.sql);
                let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
                let mut runs: Vec<lastword_core::RunListItem> = rows.into_iter().map(Into::into).collect();
                let limit = page.limit.max(1) as usize;
                let next = if runs.len() > limit {
                    runs.truncate(limit);
                    runs.last().map(|r| {
                        lastword_core::Cursor { claimed_at: r.run.claimed_at, id: r.run.id }.encode()
                    })
                } else {
                    None
                };
                Ok(lastword_core::RunPage { runs, next })
            }

            #[tracing::instrument(skip(self), err)]
            async fn cause_facets(
                &self,
                filter: &lastword_core::RunFilter,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<lastword_core::CauseFacets, $crate::StoreError> {
                $crate::rollups::cause_facets(&self.db, &self.tokens, filter, now).await
            }

            #[tracing::instrument(skip(self), err)]
            async fn overview(
                &self,
                since: chrono::DateTime<chrono::Utc>,
                until: chrono::DateTime<chrono::Utc>,
                bucket: chrono::Duration,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<lastword_core::Overview, $crate::StoreError> {
                $crate::rollups::overview(&self.db, &self.tokens, since, until, bucket, now).await
            }

            #[tracing::instrument(skip(self), err)]
            async fn workers(
                &self,
                since: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<lastword_core::WorkerSummary>, $crate::StoreError> {
                $crate::rollups::workers(&self.db, &self.tokens, since, now).await
            }

            #[tracing::instrument(skip(self), err)]
            async fn refresh_rollups(
                &self,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<$crate::RollupReport, $crate::StoreError> {
                $crate::rollups::refresh(&self.db, &self.tokens, now).await
            }

            #[tracing::instrument(skip(self), err)]
            async fn timeline_runs(
                &self,
                ids: &[i64],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<lastword_core::RunListItem>, $crate::StoreError> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let buf = $crate::queries::timeline_runs(&dialect::DIALECT, ids, now, &self.tokens);
                let query = sqlx::query_as::<_, $crate::rows::RunListRow>(&buf.sql);
                let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            #[tracing::instrument(skip(self), err)]
            async fn timeline(
                &self,
                since: chrono::DateTime<chrono::Utc>,
                until: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<lastword_core::RunListItem>, $crate::StoreError> {
                let buf = $crate::queries::timeline(&dialect::DIALECT, since, until, now, &self.tokens);
                let query = sqlx::query_as::<_, $crate::rows::RunListRow>(&buf.sql);
                let rows = $crate::queries::bind_values!(query, &buf.args).fetch_all(&self.pool).await?;
                let mut runs: Vec<lastword_core::RunListItem> = rows.into_iter().map(Into::into).collect();
                runs.sort_by(|a, b| {
                    (&a.run.worker, a.run.claimed_at, a.run.id).cmp(&(
                        &b.run.worker,
                        b.run.claimed_at,
                        b.run.id,
                    ))
                });
                Ok(runs)
            }

            #[tracing::instrument(skip(self), err)]
            async fn task_detail(
                &self,
                id: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<lastword_core::TaskDetail>, $crate::StoreError> {
                // One snapshot for the four reads (see `Dialect::begin_snapshot`).
                let mut tx = self.pool.begin_with(dialect::DIALECT.begin_snapshot).await?;
                let task: Option<$crate::rows::TaskRow> =
                    sqlx::query_as(&$crate::queries::task_by_id()).bind(id).fetch_optional(&mut *tx).await?;
                let Some(task) = task else {
                    return Ok(None);
                };
                let buf = $crate::queries::task_runs(&dialect::DIALECT, id, now, &self.tokens);
                let query = sqlx::query_as::<_, $crate::rows::RunRow>(&buf.sql);
                let runs = $crate::queries::bind_values!(query, &buf.args).fetch_all(&mut *tx).await?;
                let effects: Vec<$crate::rows::EffectRow> =
                    sqlx::query_as(&$crate::queries::task_effects()).bind(id).fetch_all(&mut *tx).await?;
                let audit: Vec<$crate::rows::ActionRow> =
                    sqlx::query_as(&$crate::queries::task_actions()).bind(id).fetch_all(&mut *tx).await?;
                tx.commit().await?;
                Ok(Some(lastword_core::TaskDetail::new(
                    task.into(),
                    runs.into_iter().map(Into::into).collect(),
                    effects.into_iter().map(Into::into).collect(),
                    audit.into_iter().map(Into::into).collect(),
                    &self.tokens,
                    now,
                )))
            }

            async fn act(
                &self,
                task_id: i64,
                kind: lastword_core::ActionKind,
                request: &lastword_core::ActionRequest,
                actor: &lastword_core::Actor,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Option<lastword_core::ActionOutcome>, $crate::StoreError> {
                self.act_impl(task_id, kind, request, actor, now).await
            }

            async fn record_refusal(
                &self,
                task_id: i64,
                kind: lastword_core::ActionKind,
                request: &lastword_core::ActionRequest,
                actor: &lastword_core::Actor,
                code: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<bool, $crate::StoreError> {
                self.record_refusal_impl(task_id, kind, request, actor, code, now).await
            }

            async fn requeue_preview(
                &self,
                selection: &lastword_core::BulkSelection,
                options: lastword_core::BulkOptions,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<lastword_core::BulkPreview, $crate::StoreError> {
                self.requeue_preview_impl(selection, options, now).await
            }

            async fn bulk_requeue(
                &self,
                selection: &lastword_core::BulkSelection,
                request: &lastword_core::BulkRequeueRequest,
                actor: &lastword_core::Actor,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<lastword_core::BulkOutcome, $crate::StoreError> {
                self.bulk_requeue_impl(selection, request, actor, now).await
            }

            async fn audit(
                &self,
                filter: &lastword_core::AuditFilter,
                page: &lastword_core::PageRequest,
            ) -> Result<lastword_core::AuditPage, $crate::StoreError> {
                self.audit_impl(filter, page).await
            }
        }

        $crate::actions::action_methods!($store);
    };
}
pub(crate) use impl_store;
