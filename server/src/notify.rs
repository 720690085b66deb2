//! Webhooks from lastword itself (issue 14, "Alerts"), for teams without Prometheus:
//! `--notify-url`, several, each with a filter of alert kinds and a body (Slack-compatible or
//! generic JSON).
//!
//! The alert kinds are the attention items (`lastword_core::attention`): a double execution
//! awaiting compensation, a lost lease of an unsafe task, a re-claim loop, a dead task. Each
//! round ([`Notifier::tick`], every few seconds):
//!
//! 1. **One sender.** The server takes or renews the notifier's lease (`notifier_lease`, like a
//!    runner's); with several dashboard servers on one database the others skip the round, and
//!    one of them takes over within a lease when the sender stops.
//! 2. **One message per incident.** The items found now are compared with the open incidents
//!    of the log (`alert_incidents`, one open per task and kind): a new item opens an incident
//!    and owes each receiver whose filter takes its kind a *firing* message; an incident whose
//!    item is gone is resolved and owes a *resolved* message to the receivers that were told it
//!    fired. Both are written in one transaction before anything is sent, so a restart loses
//!    none.
//! 3. **Delivery.** Messages due are grouped per receiver, kind and phase into one request; a
//!    receiver that was sent a firing message of a kind less than the cooldown ago gets the next
//!    ones of that kind together when it ends. A 2xx marks them delivered; a failure retries
//!    with exponential backoff, up to a limit, then gives up (logged, and in the log table). A
//!    receiver that answers 4xx (other than 408 and 429) is not retried: the URL is wrong.
//!
//! Delivery is at least once: each request is recorded as tried (and not due again within the
//! sender's lease) before it goes out, so a server that crashes between a receiver's answer and
//! recording it leaves the message to be sent again by the next sender, and a resolution to be
//! owed; each incident in a JSON body carries its own stable `delivery` id to deduplicate on.
//! The lease is renewed before every request, so a slow receiver cannot let a second server
//! take over mid-round.

use chrono::{DateTime, Duration, Utc};
use lastword_core::alerts::OpenItem;
use lastword_core::{AttentionKind, Tokens};
use lastword_store::alerts::OpenItems;
use lastword_store::notify::{self, Delivery, Incident, Round};
use lastword_store::{Db, StoreError};
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt;

/// The body a receiver takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Slack's incoming webhooks (and Mattermost's, which read the same): `text` and `blocks`.
    Slack,
    /// A documented JSON object (docs/api.md, "Webhooks").
    Json,
}

/// One `--notify-url`.
#[derive(Clone, PartialEq, Eq)]
pub struct Sink {
    /// How the log names it: host and a hash of the whole URL, never the URL (a Slack webhook's
    /// path is its secret).
    pub name: String,
    pub url: url::Url,
    pub format: Format,
    pub kinds: Vec<AttentionKind>,
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("kinds", &self.kinds)
            .finish()
    }
}

/// `s` quoted when it is a short word, else a placeholder: what a refusal may show of a value.
fn word(s: &str) -> String {
    let s = s.trim();
    if s.len() <= 24 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        format!("{s:?}")
    } else {
        "that value".to_string()
    }
}

/// FNV-1a: a stable name for a URL across restarts and versions (not a secret-keeping hash; the
/// name only has to tell receivers apart).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

impl Sink {
    /// `https://…` (every kind; a Slack body for hooks.slack.com, JSON otherwise), or
    /// `kinds=dead,loop;format=slack;url=https://…` (`url` last, so it may hold `;`).
    pub fn parse(spec: &str) -> Result<Sink, String> {
        let spec = spec.trim();
        let (mut kinds, mut format, mut url) = (AttentionKind::ALL.to_vec(), None, None);
        if spec.starts_with("http://") || spec.starts_with("https://") {
            url = Some(spec);
        } else {
            let mut rest = spec;
            while !rest.is_empty() {
                if let Some(u) = rest.strip_prefix("url=") {
                    url = Some(u);
                    break;
                }
                let (part, tail) = rest.split_once(';').unwrap_or((rest, ""));
                rest = tail;
                // A refusal never echoes what it refuses beyond a short word: the text may hold
                // the webhook's secret (a URL written where a setting was expected).
                let (key, value) = part.split_once('=').ok_or("settings are key=value, separated by ;")?;
                match key.trim() {
                    "kinds" => {
                        kinds = value
                            .split(',')
                            .map(|k| {
                                AttentionKind::parse(k).ok_or_else(|| {
                                    let known: Vec<&str> =
                                        AttentionKind::ALL.iter().map(|k| k.as_str()).collect();
                                    format!("{} is not an alert kind ({})", word(k), known.join(", "))
                                })
                            })
                            .collect::<Result<_, _>>()?;
                    }
                    "format" => {
                        format = Some(match value.trim() {
                            "slack" => Format::Slack,
                            "json" => Format::Json,
                            other => return Err(format!("{} is not a format (slack or json)", word(other))),
                        })
                    }
                    other => {
                        return Err(format!(
                            "{} is not a setting of a notify URL (kinds, format, url)",
                            word(other)
                        ))
                    }
                }
            }
        }
        let url = url.ok_or("a notify URL needs url=https://…")?;
        let url = url::Url::parse(url.trim()).map_err(|e| format!("not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("a {} URL: only http and https are sent to", url.scheme()));
        }
        let host = url.host_str().unwrap_or_default().to_string();
        let format = format.unwrap_or(if host.ends_with("slack.com") { Format::Slack } else { Format::Json });
        if kinds.is_empty() {
            return Err("kinds= names no alert kind".into());
        }
        let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
        let name = format!("{host}{port}#{:08x}", fnv1a(url.as_str()) as u32);
        Ok(Sink { name, url, format, kinds })
    }

    fn takes(&self, kind: AttentionKind) -> bool {
        self.kinds.contains(&kind)
    }
}

/// How the notifier runs.
#[derive(Clone, Debug)]
pub struct NotifyConfig {
    pub sinks: Vec<Sink>,
    /// After a firing message of a kind, the next ones of that kind to the same receiver wait
    /// this long and go together.
    pub cooldown: Duration,
    /// Between rounds.
    pub interval: std::time::Duration,
    /// This server's name in the sender's lease (unique per process).
    pub owner: String,
    /// Where the dashboard is reached, for the links in messages (no trailing slash).
    pub base_url: String,
    /// A receiver's answer is awaited this long.
    pub timeout: std::time::Duration,
    /// The first retry waits this long, each next one twice as long (at most [`MAX_BACKOFF`]).
    pub backoff: Duration,
    /// Attempts before a message is given up.
    pub max_attempts: i32,
}

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::minutes(15);
/// Deaths and unsafe lost leases are looked for this far back (the log watches older ones it
/// already has open).
const LOOK_BACK_HOURS: i64 = lastword_core::alerts::DEAD_HORIZON_HOURS;
/// Messages sent per round at most (each waits at most `timeout`), so a round stays within the
/// sender's lease.
const MAX_MESSAGES_PER_ROUND: usize = 20;
/// Incidents listed in one message; the rest are counted.
const LISTED: usize = 10;
/// Resolved incidents are kept in the log this long.
const FORGET_AFTER_DAYS: i64 = 30;
/// A task's kind is cut to this many characters in a Slack line (Slack refuses long sections).
const KIND_CHARS: usize = 80;

impl NotifyConfig {
    pub fn new(sinks: Vec<Sink>, base_url: String) -> NotifyConfig {
        NotifyConfig {
            sinks,
            cooldown: Duration::minutes(5),
            interval: std::time::Duration::from_secs(5),
            owner: format!("{}-{:016x}", std::process::id(), rand::random::<u64>()),
            base_url: base_url.trim_end_matches('/').to_string(),
            timeout: std::time::Duration::from_secs(5),
            backoff: Duration::seconds(10),
            max_attempts: 10,
        }
    }

    /// How long the sender's lease lasts: a few rounds, and longer than one request (it is
    /// renewed before each).
    fn lease(&self) -> Duration {
        let secs = (self.interval.as_secs_f64() * 3.0).max(self.timeout.as_secs_f64() * 2.0).max(15.0);
        Duration::milliseconds((secs * 1000.0) as i64)
    }
}

/// What one round did (for logs and tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// This server holds the sender's lease (otherwise nothing else happened).
    pub leading: bool,
    pub opened: usize,
    pub resolved: usize,
    /// Requests answered 2xx, and the messages they carried.
    pub sent: usize,
    pub delivered: usize,
    /// Requests that failed (retried later or given up).
    pub failed: usize,
    /// Messages held back by a cooldown.
    pub postponed: usize,
}

/// Compares what is open now with the log's open incidents (step 2 of the module header).
pub fn plan(open: &[Incident], found: &OpenItems, sinks: &[Sink], now: DateTime<Utc>) -> Round {
    let mut round = Round::default();
    let owed = |kind: AttentionKind| {
        sinks.iter().filter(|s| s.takes(kind)).map(|s| s.name.clone()).collect::<Vec<_>>()
    };
    let look_back = now - Duration::hours(LOOK_BACK_HOURS);
    for incident in open {
        let still = found.items.iter().any(|i| {
            i.kind == incident.kind
                && i.task_id == incident.task_id
                && (incident.kind != AttentionKind::Dead || i.epoch == incident.epoch)
        });
        if still && incident.kind == AttentionKind::Dead && incident.opened_at < look_back {
            // Left dead: nobody re-queued it in a day. Stop watching it, quietly.
            round.expire.push(incident.id);
        } else if !still && !found.partial.contains(&incident.kind) {
            round.resolve.push(incident.id);
        }
    }
    for item in &found.items {
        let is_open = open.iter().any(|o| {
            o.kind == item.kind
                && o.task_id == item.task_id
                && !round.resolve.contains(&o.id)
                && !round.expire.contains(&o.id)
        });
        let expired = round
            .expire
            .iter()
            .any(|id| open.iter().any(|o| o.id == *id && o.kind == item.kind && o.task_id == item.task_id));
        if !is_open && !expired {
            round.open.push((item.clone(), owed(item.kind)));
        }
    }
    // Oldest first, so a message lists its incidents in the order they began.
    round.open.sort_by_key(|(i, _)| (i.since, i.task_id));
    round
}

/// Messages going together in one request: one receiver, kind and phase.
type Batch<'a> = Vec<&'a Delivery>;
/// Messages a cooldown holds back, and until when.
type Held = (Vec<i64>, DateTime<Utc>);

/// The messages to send now, grouped per receiver, kind and phase, and those a cooldown holds
/// back until when (step 3).
fn batches<'a>(
    due: &'a [Delivery],
    last_fired: &[(String, String, DateTime<Utc>)],
    cooldown: Duration,
    now: DateTime<Utc>,
) -> (Vec<Batch<'a>>, Vec<Held>) {
    let mut groups: BTreeMap<(String, bool, &'static str), Vec<&Delivery>> = BTreeMap::new();
    for d in due {
        groups.entry((d.sink.clone(), d.resolved, d.incident.kind.as_str())).or_default().push(d);
    }
    let (mut send, mut hold) = (Vec::new(), Vec::new());
    for ((sink, resolved, kind), group) in groups {
        let last = last_fired.iter().find(|(s, k, _)| *s == sink && k == kind).map(|(_, _, t)| *t);
        match last.map(|t| t + cooldown).filter(|until| !resolved && *until > now) {
            Some(until) => hold.push((group.iter().map(|d| d.id).collect(), until)),
            None => send.push(group),
        }
    }
    (send, hold)
}

/// A task's page.
fn task_url(base: &str, task_id: i64) -> String {
    format!("{base}/tasks/{task_id}")
}

/// Runner text on one line of at most `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// Slack's mrkdwn treats these three as control characters; runner data must not.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn headline(kind: AttentionKind, n: usize, resolved: bool) -> String {
    let what = match kind {
        AttentionKind::DoubleExecution => "Executed twice, awaiting compensation",
        AttentionKind::UnsafeLostLease => "Unsafe task lost its lease, effects may have run twice",
        AttentionKind::Loop => "Re-claim loop",
        AttentionKind::Dead => "Dead, every attempt used",
    };
    let tasks = if n == 1 { "1 task".to_string() } else { format!("{n} tasks") };
    if resolved {
        format!("Resolved — {what}: {tasks}")
    } else {
        format!("{what}: {tasks}")
    }
}

/// The request body for `group` (one receiver, kind and phase).
pub fn body(format: Format, group: &[&Delivery], base_url: &str, message_id: &str) -> serde_json::Value {
    let Some(first) = group.first() else { return json!({}) };
    let (kind, resolved) = (first.incident.kind, first.resolved);
    let title = headline(kind, group.len(), resolved);
    match format {
        Format::Json => json!({
            "source": "lastword",
            "delivery": message_id,
            "status": if resolved { "resolved" } else { "firing" },
            "kind": kind.as_str(),
            "title": title,
            "dashboard": base_url,
            "incidents": group.iter().map(|d| json!({
                "delivery": format!("lw-{}", d.id),
                "task_id": d.incident.task_id,
                "task_kind": d.incident.task_kind,
                "epoch": d.incident.epoch,
                "began_at": d.incident.began_at,
                "opened_at": d.incident.opened_at,
                "resolved_at": d.resolved_at,
                "url": task_url(base_url, d.incident.task_id),
            })).collect::<Vec<_>>(),
        }),
        Format::Slack => {
            let icon = if resolved { ":white_check_mark:" } else { ":rotating_light:" };
            let mut lines: Vec<String> = group
                .iter()
                .take(LISTED)
                .map(|d| {
                    let since = d
                        .incident
                        .began_at
                        .map(|t| format!(" since {} UTC", lastword_core::time_text::hm(&t)))
                        .unwrap_or_default();
                    format!(
                        "• <{}|task {}> `{}` epoch {}{since}",
                        task_url(base_url, d.incident.task_id),
                        d.incident.task_id,
                        slack_escape(&one_line(&d.incident.task_kind, KIND_CHARS)).replace('`', "'"),
                        d.incident.epoch
                    )
                })
                .collect();
            if group.len() > LISTED {
                lines.push(format!("…and {} more", group.len() - LISTED));
            }
            let action = match (kind, resolved) {
                (_, true) => "Nothing more to do for these.",
                (AttentionKind::DoubleExecution | AttentionKind::UnsafeLostLease, _) => {
                    "Check the effects, compensate, then mark the task compensated."
                }
                (AttentionKind::Loop, _) => {
                    "A poison task: look at its runs before it takes more workers down."
                }
                (AttentionKind::Dead, _) => "Find the cause, then re-queue or leave it.",
            };
            json!({
                "text": format!("{icon} lastword: {title}"),
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": format!("{icon} *{title}*\n{}", lines.join("\n"))}},
                    {"type": "context", "elements": [{"type": "mrkdwn", "text": format!("{action} <{base_url}|Open lastword> · delivery {message_id}")}]},
                ],
            })
        }
    }
}

/// The notifier of one dashboard server.
pub struct Notifier {
    db: Db,
    tokens: Tokens,
    config: NotifyConfig,
    client: reqwest::Client,
    /// When the log last forgot old incidents.
    forgot: std::sync::Mutex<Option<DateTime<Utc>>>,
}

/// Why a request failed, and whether to try again.
struct Failure {
    error: String,
    retry: bool,
}

impl Notifier {
    pub fn new(db: Db, tokens: Tokens, config: NotifyConfig) -> Result<Notifier, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("lastword/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Notifier { db, tokens, config, client, forgot: Default::default() })
    }

    pub fn config(&self) -> &NotifyConfig {
        &self.config
    }

    /// One round (see the module header), as of `now`.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, StoreError> {
        let mut report = TickReport::default();
        if !notify::lead(&self.db, &self.config.owner, now, now + self.config.lease()).await? {
            return Ok(report);
        }
        report.leading = true;
        let open = notify::open_incidents(&self.db).await?;
        let watch: Vec<i64> = open.iter().map(|i| i.task_id).collect();
        let since = now - Duration::hours(LOOK_BACK_HOURS);
        let found = lastword_store::alerts::open_items(&self.db, &self.tokens, since, now, &watch).await?;
        let round = plan(&open, &found, &self.config.sinks, now);
        (report.opened, report.resolved) = (round.open.len(), round.resolve.len());
        if !round.open.is_empty() || !round.resolve.is_empty() || !round.expire.is_empty() {
            notify::record(&self.db, &round, now).await?;
            let opened: Vec<String> = round.open.iter().map(|(i, _)| describe(i)).collect();
            tracing::info!(opened = ?opened, resolved = round.resolve.len(), expired = round.expire.len(), "notify: incidents changed");
        }
        let due = notify::due(&self.db, now, 1_000).await?;
        let last_fired = notify::last_fired(&self.db).await?;
        let (send, hold) = batches(&due, &last_fired, self.config.cooldown, now);
        for (ids, until) in hold {
            report.postponed += ids.len();
            notify::postpone(&self.db, &ids, until).await?;
        }
        for group in send.into_iter().take(MAX_MESSAGES_PER_ROUND) {
            let ids: Vec<i64> = group.iter().map(|d| d.id).collect();
            let Some(sink) = self.config.sinks.iter().find(|s| s.name == group[0].sink) else {
                // A receiver no longer configured: give its messages up rather than keep them due.
                notify::failed(&self.db, &ids, "receiver no longer configured", None, now).await?;
                continue;
            };
            // Renew the lease before each request (a slow receiver must not let another server
            // take over mid-round and send the same messages), and mark them tried.
            let at = now.max(Utc::now());
            if !notify::lead(&self.db, &self.config.owner, at, at + self.config.lease()).await? {
                tracing::warn!("notify: lost the sender's lease mid-round; another server sends");
                break;
            }
            let message_id = format!("lw-{}-{}-{}", ids[0], ids[ids.len() - 1], ids.len());
            notify::attempting(&self.db, &ids, &message_id, at + self.config.lease()).await?;
            match self.send(sink, &group, &message_id).await {
                Ok(()) => {
                    notify::delivered(&self.db, &ids, now.max(Utc::now())).await?;
                    report.sent += 1;
                    report.delivered += ids.len();
                }
                Err(failure) => {
                    report.failed += 1;
                    self.failed(sink, &group, &failure, now).await?;
                }
            }
        }
        if self.forgot.lock().map(|last| last.is_none_or(|t| now - t > Duration::hours(1))).unwrap_or(false) {
            let forgotten = notify::forget(&self.db, now - Duration::days(FORGET_AFTER_DAYS)).await?;
            if forgotten > 0 {
                tracing::info!(
                    incidents = forgotten,
                    "notify: forgot incidents resolved over {FORGET_AFTER_DAYS} days ago"
                );
            }
            if let Ok(mut last) = self.forgot.lock() {
                *last = Some(now);
            }
        }
        Ok(report)
    }

    /// Records a failed request: each message is retried after its own backoff (its own
    /// attempts), or given up when it has used them or the receiver refused for good.
    async fn failed(
        &self,
        sink: &Sink,
        group: &[&Delivery],
        failure: &Failure,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut by_retry: BTreeMap<Option<DateTime<Utc>>, Vec<i64>> = BTreeMap::new();
        for d in group {
            let attempts = d.attempts + 1;
            let retry_at = (failure.retry && attempts < self.config.max_attempts).then(|| {
                let wait = self.config.backoff * 2_i32.saturating_pow((attempts - 1).clamp(0, 16) as u32);
                now + wait.min(MAX_BACKOFF)
            });
            by_retry.entry(retry_at).or_default().push(d.id);
        }
        for (retry_at, ids) in by_retry {
            if retry_at.is_none() {
                tracing::error!(sink = %sink.name, error = %failure.error, messages = ids.len(), "notify: giving up");
            } else {
                tracing::warn!(sink = %sink.name, error = %failure.error, messages = ids.len(), "notify: will retry");
            }
            notify::failed(&self.db, &ids, &failure.error, retry_at, now).await?;
        }
        Ok(())
    }

    async fn send(&self, sink: &Sink, group: &[&Delivery], message_id: &str) -> Result<(), Failure> {
        let body = body(sink.format, group, &self.config.base_url, message_id);
        let response = self
            .client
            .post(sink.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("X-Lastword-Delivery", message_id)
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| Failure { error: format!("{}", e.without_url()), retry: true })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let permanent = status.is_client_error() && !matches!(status.as_u16(), 408 | 429);
        Err(Failure { error: format!("answered {status}"), retry: !permanent })
    }

    /// Runs rounds every `interval` until `stop` says so, then gives the lease up.
    pub fn spawn(self, mut stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let names: Vec<&str> = self.config.sinks.iter().map(|s| s.name.as_str()).collect();
            tracing::info!(receivers = ?names, "notify: sending alerts");
            let mut failing = false;
            loop {
                match self.tick(Utc::now()).await {
                    Ok(_) if failing => {
                        tracing::info!("notify: working again");
                        failing = false;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "notify: a round failed; retrying");
                        }
                        failing = true;
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(self.config.interval) => {}
                    _ = stop.changed() => break,
                }
            }
            if let Err(e) = notify::resign(&self.db, &self.config.owner).await {
                tracing::warn!(error = %e, "notify: could not give the sender's lease up");
            }
        })
    }
}

fn describe(item: &OpenItem) -> String {
    format!("{} task {}", item.kind.as_str(), item.task_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notify_url_names_its_kinds_format_and_receiver_without_its_secret() {
        let slack = Sink::parse("https://hooks.slack.com/services/T0/B0/secret").unwrap();
        assert_eq!(slack.format, Format::Slack);
        assert_eq!(slack.kinds, AttentionKind::ALL);
        assert!(
            slack.name.starts_with("hooks.slack.com#") && !slack.name.contains("secret"),
            "{}",
            slack.name
        );
        assert!(!format!("{slack:?}").contains("secret"));
        let json = Sink::parse("kinds=dead,loop;format=json;url=http://127.0.0.1:9/hook?a=1;b=2").unwrap();
        assert_eq!(
            (json.format, json.kinds.clone()),
            (Format::Json, vec![AttentionKind::Dead, AttentionKind::Loop])
        );
        assert_eq!(json.url.as_str(), "http://127.0.0.1:9/hook?a=1;b=2");
        assert_ne!(json.name, Sink::parse("http://127.0.0.1:9/other").unwrap().name);
        let refused = Sink::parse("kinds=dead;hooks.slack.com/services/T0/B0/SECRET").unwrap_err();
        assert!(!refused.contains("SECRET"), "a refusal never echoes the secret: {refused}");
        let refused = Sink::parse("ftp://hooks.example/SECRET").unwrap_err();
        assert!(!refused.contains("SECRET"), "{refused}");
        for bad in [
            "kinds=nope;url=http://x",
            "ftp://x/y",
            "format=xml;url=http://x",
            "colour=red;url=http://x",
            "kinds=dead",
        ] {
            assert!(Sink::parse(bad).is_err(), "{bad}");
        }
    }

    fn incident(id: i64, kind: AttentionKind, task_id: i64, epoch: i64) -> Incident {
        Incident {
            id,
            kind,
            task_id,
            task_kind: "refund".into(),
            epoch,
            began_at: None,
            opened_at: Utc::now(),
        }
    }

    fn item(kind: AttentionKind, task_id: i64, epoch: i64) -> OpenItem {
        OpenItem { kind, task_id, task_kind: "refund".into(), epoch, since: None }
    }

    #[test]
    fn a_round_opens_what_is_new_resolves_what_is_gone_and_keeps_what_it_cannot_see() {
        let sinks = [Sink::parse("kinds=dead;url=http://a/").unwrap(), Sink::parse("http://b/").unwrap()];
        let open = [
            incident(1, AttentionKind::Dead, 7, 3),
            incident(2, AttentionKind::Loop, 8, 5),
            incident(3, AttentionKind::DoubleExecution, 9, 1),
        ];
        let found = OpenItems {
            items: vec![
                item(AttentionKind::Dead, 7, 3),
                item(AttentionKind::Dead, 10, 1),
                item(AttentionKind::Loop, 11, 4),
            ],
            partial: vec![AttentionKind::DoubleExecution],
        };
        let round = plan(&open, &found, &sinks, Utc::now());
        // Task 8's loop ended; the double execution's flags are being backfilled: kept open.
        assert_eq!(round.resolve, [2]);
        let opened: Vec<(i64, usize)> = round.open.iter().map(|(i, s)| (i.task_id, s.len())).collect();
        assert_eq!(opened, [(10, 2), (11, 1)], "the dead-only receiver is not owed the loop");
        // Re-queued and dead again: the old incident resolves and a new one opens.
        let again = OpenItems { items: vec![item(AttentionKind::Dead, 7, 5)], partial: vec![] };
        let round = plan(&open[..1], &again, &sinks, Utc::now());
        assert_eq!((round.resolve.clone(), round.open.len()), (vec![1], 1));
        // Still dead a day after it opened: closed quietly, not reopened, nothing resolved.
        let old = Incident {
            opened_at: Utc::now() - Duration::hours(25),
            ..incident(1, AttentionKind::Dead, 7, 3)
        };
        let still = OpenItems { items: vec![item(AttentionKind::Dead, 7, 3)], partial: vec![] };
        let round = plan(&[old], &still, &sinks, Utc::now());
        assert_eq!((round.expire.clone(), round.resolve.len(), round.open.len()), (vec![1], 0, 0));
    }

    #[test]
    fn a_cooldown_holds_firing_messages_of_its_kind_back_and_never_a_resolution() {
        let now = Utc::now();
        let d = |id, kind, resolved| Delivery {
            id,
            sink: "a".into(),
            resolved,
            attempts: 0,
            incident: incident(id, kind, id, 1),
            resolved_at: None,
        };
        let due = [
            d(1, AttentionKind::Dead, false),
            d(2, AttentionKind::Dead, false),
            d(3, AttentionKind::Loop, false),
            d(4, AttentionKind::Dead, true),
        ];
        let fired = [("a".to_string(), "dead".to_string(), now - Duration::minutes(1))];
        let (send, hold) = batches(&due, &fired, Duration::minutes(5), now);
        let sent: Vec<Vec<i64>> = send.iter().map(|g| g.iter().map(|d| d.id).collect()).collect();
        assert_eq!(sent, [vec![3], vec![4]], "the loop fires; dead's resolution is not held");
        assert_eq!(hold, [(vec![1, 2], now + Duration::minutes(4))]);
        let (send, hold) = batches(&due, &fired, Duration::seconds(30), now);
        assert_eq!((send.len(), hold.len()), (3, 0));
    }

    #[test]
    fn a_slack_body_links_each_task_and_escapes_runner_text() {
        let d = Delivery {
            id: 5,
            sink: "a".into(),
            resolved: false,
            attempts: 0,
            incident: Incident {
                task_kind: "<!channel> & `x`".into(),
                ..incident(5, AttentionKind::Dead, 42, 3)
            },
            resolved_at: None,
        };
        let body = body(Format::Slack, &[&d], "https://lw.example", "lw-5-5-1");
        let text = body["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(text.contains("<https://lw.example/tasks/42|task 42>"), "{text}");
        assert!(text.contains("&lt;!channel&gt; &amp; 'x'") && !text.contains("<!channel>"), "{text}");
        assert_eq!(body["text"], ":rotating_light: lastword: Dead, every attempt used: 1 task");
        let json = super::body(Format::Json, &[&d], "https://lw.example", "lw-5-5-1");
        assert_eq!(json["incidents"][0]["url"], "https://lw.example/tasks/42");
        assert_eq!((json["status"].as_str(), json["kind"].as_str()), (Some("firing"), Some("dead")));
    }
}
