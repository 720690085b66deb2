//! Times as an on-call engineer wants them: absolute (UTC by default, local on request) with
//! the age beside it, and a clock that ticks so ages and lease countdowns stay true.

use chrono::{DateTime, Utc};
use lastword_core::time_text::{self, date_hms};
use leptos::prelude::*;

/// Shared by every time on the page: the display zone and "now".
#[derive(Clone, Copy)]
pub struct TimePrefs {
    pub utc: RwSignal<bool>,
    pub now: RwSignal<DateTime<Utc>>,
}

/// Installs [`TimePrefs`]; in the browser, "now" ticks every second.
pub fn provide_time_prefs() -> TimePrefs {
    let prefs = TimePrefs { utc: RwSignal::new(true), now: RwSignal::new(Utc::now()) };
    #[cfg(feature = "hydrate")]
    {
        let now = prefs.now;
        let _ = set_interval_with_handle(move || now.set(Utc::now()), std::time::Duration::from_secs(1));
        if let Some(Ok(Some(storage))) = web_sys::window().map(|w| w.local_storage()) {
            if let Ok(Some(v)) = storage.get_item("lastword-utc") {
                prefs.utc.set(v != "false");
            }
        }
        let utc = prefs.utc;
        Effect::new(move |_| {
            let v = utc.get();
            if let Some(Ok(Some(storage))) = web_sys::window().map(|w| w.local_storage()) {
                let _ = storage.set_item("lastword-utc", if v { "true" } else { "false" });
            }
        });
    }
    provide_context(prefs);
    prefs
}

pub fn use_time_prefs() -> TimePrefs {
    use_context::<TimePrefs>().unwrap_or_else(provide_time_prefs)
}

/// `3s`, `4m 05s`, `2h 10m`, `3d 4h`.
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.abs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// "4m 05s ago" or "in 12s".
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - t).num_seconds();
    if secs >= 0 {
        format!("{} ago", human_duration(secs))
    } else {
        format!("in {}", human_duration(-secs))
    }
}

pub fn absolute(t: DateTime<Utc>, utc: bool) -> String {
    if utc {
        lastword_core::action::fmt_time(t)
    } else {
        let local = t.with_timezone(&chrono::Local);
        format!("{} {}", date_hms(&local), time_text::offset(&local))
    }
}

/// An absolute time with its age; the machine-readable value in `datetime`.
#[component]
pub fn Time(t: DateTime<Utc>, #[prop(optional)] short: bool) -> impl IntoView {
    let prefs = use_time_prefs();
    let iso = t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    view! {
        <time datetime=iso.clone() title=iso class="time">
            {move || {
                let abs = absolute(t, prefs.utc.get());
                if short { abs[11..].to_string() } else { abs }
            }}
            <span class="muted age">{move || format!(" ({})", relative(t, prefs.now.get()))}</span>
        </time>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(65), "1m 05s");
        assert_eq!(human_duration(7260), "2h 01m");
        assert_eq!(human_duration(90_000), "1d 1h");
        let now = Utc::now();
        assert_eq!(relative(now - chrono::Duration::seconds(3), now), "3s ago");
        assert_eq!(relative(now + chrono::Duration::seconds(12), now), "in 12s");
    }
}
