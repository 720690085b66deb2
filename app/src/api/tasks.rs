//! One task's story for the task page.

use lastword_core::TaskDetail;
use leptos::prelude::*;

#[server(prefix = "/api/fn", endpoint = "task", output = crate::api::JsonAnswer)]
pub async fn get_task(id: i64) -> Result<Option<TaskDetail>, ServerFnError> {
    let store = super::ssr::store()?;
    store.task_detail(id, lastword_core::read_now()).await.map_err(super::ssr::store_error)
}
