//! Exports for the write-up (issue 14): `GET /api/v1/tasks/{id}/export?format=md|json` (a
//! task's whole story, `lastword_core::export`) and `GET /api/v1/runs/export?format=csv|ndjson`
//! (a filtered list, streamed a keyset page at a time and bounded by `max`).
//!
//! Both are downloads (`Content-Disposition: attachment`), so a browser link on the task and
//! failures pages saves a file and a script gets the same bytes.

use super::{path_id, query_pairs, read_now, write_now, ApiError};
use crate::AppState;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, SecondsFormat, Utc};
use futures::StreamExt;
use lastword_core::query::{parse_run_filter, MAX_LIMIT};
use lastword_core::{PageRequest, ParamError, RunFilter, RunListItem, TraceLinks};
use std::sync::Arc;

/// Rows a list export sends unless `max` says otherwise, and the most it may ask for.
pub const DEFAULT_MAX_ROWS: u64 = 10_000;
pub const MAX_ROWS: u64 = 100_000;

/// `format`, the only parameter a task export takes (default `md`).
fn one_param<'a>(
    pairs: &'a [(String, String)],
    name: &str,
    allowed: &[&str],
) -> Result<Option<&'a str>, ParamError> {
    let mut found = None;
    for (key, value) in pairs {
        if !allowed.contains(&key.as_str()) {
            return Err(ParamError::new(key, format!("unknown parameter; expected {}", allowed.join(", "))));
        }
        if key == name {
            if found.is_some() {
                return Err(ParamError::new(name, "given more than once"));
            }
            found = Some(value.trim());
        }
    }
    Ok(found)
}

fn download(content_type: &str, filename: String, body: impl Into<Body>) -> Response {
    (
        [
            (CONTENT_TYPE, content_type.to_string()),
            (CONTENT_DISPOSITION, format!("attachment; filename=\"{filename}\"")),
        ],
        body.into(),
    )
        .into_response()
}

/// The task's story as Markdown (default) or JSON (the task API's answer, whole texts).
#[utoipa::path(get, path = "/tasks/{id}/export", tag = "tasks",
    params(super::openapi::IdPath, ("format" = Option<super::openapi::TaskFormat>, Query, description = "`md` (default) or `json`")),
    responses((status = 200, description = "A download: the story as Markdown, or the task's answer as JSON with whole texts",
        content((String = "text/markdown"), (lastword_core::TaskDetail = "application/json"))), super::openapi::Refusals))]
pub async fn task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = path_id("id", &id)?;
    let pairs = query_pairs(raw.as_deref());
    let format = one_param(&pairs, "format", &["format"])?.unwrap_or("md");
    if !matches!(format, "md" | "json") {
        return Err(ParamError::new("format", format!("{format:?}: expected md or json")).into());
    }
    let now = write_now();
    let Some(detail) = state.store.task_detail(id, read_now()).await? else {
        return Err(ApiError::NotFound(format!("task {id}")));
    };
    Ok(if format == "md" {
        let md = lastword_core::export::task_markdown(&detail, state.site.trace_links.as_ref(), now);
        download("text/markdown; charset=utf-8", format!("task-{id}.md"), md)
    } else {
        let disposition = format!("attachment; filename=\"task-{id}.json\"");
        ([(CONTENT_DISPOSITION, disposition)], axum::Json(detail)).into_response()
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ListFormat {
    Csv,
    Ndjson,
}

/// The CSV header; [`csv_record`] writes the fields in this order.
pub const CSV_COLUMNS: [&str; 20] = [
    "run_id",
    "task_id",
    "kind",
    "source",
    "safety",
    "worker",
    "lease_epoch",
    "state",
    "cause",
    "claimed_at",
    "lease_expires_at",
    "heartbeat_at",
    "finished_at",
    "completion_rows",
    "error",
    "error_detail",
    "output",
    "text_truncated",
    "trace_id",
    "trace_url",
];

/// A cell a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or carriage return
/// first) is prefixed with `'`: runner text is untrusted and these files get opened in Excel.
pub fn defuse(text: &str) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_string()
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn csv_record(item: &RunListItem, links: Option<&TraceLinks>) -> [String; 20] {
    let r = &item.run;
    let opt_time = |t: Option<DateTime<Utc>>| t.map(time).unwrap_or_default();
    let text = |t: &Option<String>| t.as_deref().map(defuse).unwrap_or_default();
    let trace_url = r.trace_id.as_deref().and_then(|id| links.and_then(|l| l.url(id))).unwrap_or_default();
    [
        r.id.to_string(),
        r.task_id.to_string(),
        defuse(&item.kind),
        item.source.to_string(),
        item.safety.to_string(),
        defuse(&r.worker),
        r.lease_epoch.to_string(),
        r.state.as_str().to_string(),
        r.cause.map(|c| c.as_str().to_string()).unwrap_or_default(),
        time(r.claimed_at),
        time(r.lease_expires_at),
        opt_time(r.heartbeat_at),
        opt_time(r.finished_at),
        r.completion_rows.map(|n| n.to_string()).unwrap_or_default(),
        text(&r.error),
        text(&r.error_detail),
        text(&r.output),
        item.text_truncated.to_string(),
        text(&r.trace_id),
        trace_url,
    ]
}

/// One chunk of the body: the rows of one keyset page.
fn encode(format: ListFormat, rows: &[RunListItem], links: Option<&TraceLinks>, header: bool) -> Vec<u8> {
    match format {
        ListFormat::Ndjson => {
            let mut out = Vec::new();
            for row in rows {
                // A RunListItem always serialises (plain data); a failure would be a bug here.
                if serde_json::to_writer(&mut out, row).is_ok() {
                    out.push(b'\n');
                }
            }
            out
        }
        ListFormat::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            if header {
                let _ = w.write_record(CSV_COLUMNS);
            }
            for row in rows {
                let _ = w.write_record(csv_record(row, links));
            }
            w.into_inner().unwrap_or_default()
        }
    }
}

/// Why an export stopped: the store failed, or (a bug) the store's own cursor did not decode.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error(transparent)]
    Store(#[from] lastword_store::StoreError),
    #[error("the store's next-page cursor did not decode: {0}")]
    Cursor(ParamError),
}

impl From<ExportError> for ApiError {
    fn from(e: ExportError) -> Self {
        match e {
            ExportError::Store(e) => e.into(),
            // Never seen: the cursor is the store's own; a 500 with the cause in the log.
            ExportError::Cursor(e) => ApiError::Internal(lastword_store::StoreError::Config(e.to_string())),
        }
    }
}

struct Cursor {
    store: Arc<dyn lastword_store::Store>,
    filter: RunFilter,
    page: PageRequest,
    now: DateTime<Utc>,
    sent: u64,
    max: u64,
    done: bool,
}

/// Runs matching the `/api/v1/runs` filters as CSV (with a header row) or NDJSON (one
/// `/runs` item per line), newest claim first, at most `max` rows (default 10 000, at most
/// 100 000). Texts are the lists' 300-character prefixes, `text_truncated` saying where.
/// A bad parameter is a 400 before anything is sent; the first page is read before the
/// answer starts, so an unreachable database is a 503, not an empty file.
#[utoipa::path(get, path = "/runs/export", tag = "runs",
    params(super::openapi::RunFilterParams,
        ("format" = super::openapi::ListFormat, Query, description = "`csv` or `ndjson`"),
        ("max" = Option<u64>, Query, minimum = 1, maximum = 100000, description = "At most this many rows (default 10 000)")),
    responses((status = 200, description = "A download: CSV with a header row, or one run list item per line",
        content((String = "text/csv"), (String = "application/x-ndjson"))), super::openapi::Refusals))]
pub async fn runs(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let pairs = query_pairs(raw.as_deref());
    let mut format = None;
    let mut max = None;
    let mut filters = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "format" | "max" if pairs_seen(&format, &max, &key) => {
                return Err(ParamError::new(&key, "given more than once").into())
            }
            "format" => {
                format = Some(match value.trim() {
                    "csv" => ListFormat::Csv,
                    "ndjson" => ListFormat::Ndjson,
                    other => {
                        return Err(
                            ParamError::new("format", format!("{other:?}: expected csv or ndjson")).into()
                        )
                    }
                })
            }
            "max" => {
                max = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=MAX_ROWS).contains(n))
                    .map(Some)
                    .ok_or_else(|| {
                        ParamError::new("max", format!("must be a whole number from 1 to {MAX_ROWS}"))
                    })?;
            }
            "limit" | "after" => {
                return Err(ParamError::new(
                    &key,
                    "an export is not paged: use max, and until to go further back",
                )
                .into())
            }
            _ => filters.push((key, value)),
        }
    }
    // The filter first: an unknown parameter is named before a missing format.
    let now = read_now();
    let filter = parse_run_filter(&filters, now, &["format", "max"])?;
    let format = format.ok_or_else(|| ParamError::new("format", "required: csv or ndjson"))?;
    let max = max.unwrap_or(DEFAULT_MAX_ROWS);
    let page = PageRequest { limit: MAX_LIMIT, after: None };
    let mut cursor = Cursor { store: state.store.clone(), filter, page, now, sent: 0, max, done: false };
    let links = state.site.trace_links.clone();
    // The first page before the headers: its failure is still a clean error status.
    let first = next_rows(&mut cursor).await?;
    let head = encode(format, &first, links.as_ref(), true);
    let rest = futures::stream::unfold((cursor, links), move |(mut cursor, links)| async move {
        if cursor.done {
            return None;
        }
        match next_rows(&mut cursor).await {
            Ok(rows) if rows.is_empty() => None,
            Ok(rows) => Some((Ok(encode(format, &rows, links.as_ref(), false)), (cursor, links))),
            Err(e) => {
                // Headers are gone: abort the body so the download fails visibly.
                tracing::error!(error = %e, "runs export stopped by a store error");
                cursor.done = true;
                Some((Err(std::io::Error::other(e.to_string())), (cursor, links)))
            }
        }
    });
    // Fused: the compression layer polls a body once more after its end, which an `unfold`
    // answers with a panic.
    let body = futures::stream::once(async move { Ok::<_, std::io::Error>(head) }).chain(rest).fuse();
    let (content_type, ext) = match format {
        ListFormat::Csv => ("text/csv; charset=utf-8", "csv"),
        ListFormat::Ndjson => ("application/x-ndjson", "ndjson"),
    };
    Ok(download(content_type, format!("lastword-runs.{ext}"), Body::from_stream(body)))
}

fn pairs_seen(format: &Option<ListFormat>, max: &Option<u64>, key: &str) -> bool {
    (key == "format" && format.is_some()) || (key == "max" && max.is_some())
}

/// The next keyset page, cut to what `max` leaves; empty when done.
async fn next_rows(c: &mut Cursor) -> Result<Vec<RunListItem>, ExportError> {
    if c.done || c.sent >= c.max {
        c.done = true;
        return Ok(Vec::new());
    }
    let page = c.store.list_runs(&c.filter, &c.page, c.now).await?;
    let mut rows = page.runs;
    let left = (c.max - c.sent) as usize;
    rows.truncate(left);
    c.sent += rows.len() as u64;
    match page.next {
        Some(next) if c.sent < c.max => {
            c.page.after = Some(lastword_core::Cursor::decode(&next).map_err(ExportError::Cursor)?)
        }
        _ => c.done = true,
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_defused() {
        assert_eq!(defuse("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(defuse("+1"), "'+1");
        assert_eq!(defuse("-2"), "'-2");
        assert_eq!(defuse("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(defuse("replied to @ann"), "replied to @ann");
    }
}
