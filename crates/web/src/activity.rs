//! The activity page: calls by verdict over time as a stacked bar chart in inline SVG (rendered here, no script,
//! no chart library), with a legend and the same numbers as a table for screen readers and text browsers.
//!
//! Colours come from classes in `console.css` (`v-allow`, ...): the Content-Security-Policy forbids inline styles.
//! The counting rules live in the store ([`toolgate_store::Store::activity`]); this module only draws.

use std::fmt::Write as _;
use std::time::SystemTime;

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{Html, IntoResponse, Response};
use toolgate_store::{Activity, ActivitySpan, ActivityVerdict};

use crate::handlers::{not_logged_in, session, store_failure};
use crate::html::{Page, escape, layout};
use crate::{Console, form};

/// The drawing area, in SVG user units (the SVG scales to the page's width).
const WIDTH: u32 = 720;
const HEIGHT: u32 = 260;
/// Room for the axis labels.
const LEFT: u32 = 40;
const BOTTOM: u32 = 24;
const TOP: u32 = 8;

/// `GET /console/activity?span=hour|day`.
pub(crate) async fn activity_page(State(console): State<Console>, uri: Uri, headers: HeaderMap) -> Response {
    let Some((_, session)) = session(&console, &headers).await else {
        return not_logged_in(&console, &uri);
    };
    let query = form::parse(uri.query().unwrap_or_default());
    let span = match form::field(&query, "span") {
        Some("day") => ActivitySpan::LastDay,
        _ => ActivitySpan::LastHour,
    };
    match console.store.activity(span, SystemTime::now()).await {
        Ok(activity) => Html(render(&activity, &session.csrf)).into_response(),
        Err(error) => store_failure(&error),
    }
}

/// What a person reads for each verdict.
fn label(verdict: ActivityVerdict) -> &'static str {
    match verdict {
        ActivityVerdict::Allow => "allowed",
        ActivityVerdict::ConfirmApproved => "confirmed, approved",
        ActivityVerdict::ConfirmWaiting => "confirm, waiting",
        ActivityVerdict::ConfirmRefused => "confirm, refused",
        ActivityVerdict::Deny => "denied",
        ActivityVerdict::Hidden => "hidden",
        ActivityVerdict::Unknown => "unknown verdict",
    }
}

/// `HH:MM` of a bucket's RFC 3339 start.
fn clock(start: &str) -> &str {
    start.get(11..16).unwrap_or(start)
}

/// The whole page.
pub(crate) fn render(activity: &Activity, csrf: &str) -> String {
    let (name, other, other_name) = match activity.span {
        ActivitySpan::LastHour => ("the last hour, per minute", "day", "the last 24 hours"),
        ActivitySpan::LastDay => ("the last 24 hours, per hour", "hour", "the last hour"),
    };
    let total: u64 = activity.buckets.iter().map(|bucket| bucket.total()).sum();
    let mut body = format!(
        "<h1>Activity</h1><p>Tool calls by verdict over {name} (UTC), {total} in all. \
         <a href=\"/console/activity?span={other}\">Show {other_name}</a></p>"
    );
    body.push_str(&chart(activity, name, total));
    legend(&mut body);
    table(&mut body, activity);
    body.push_str(
        "<p class=\"meta\">A call counts once, when it was decided. Calls to tools that do not exist are not \
         recorded, so they are not counted.</p>",
    );
    layout("Activity", Page::Activity, Some(csrf), &body)
}

/// The stacked bars, with an accessible name and description.
fn chart(activity: &Activity, name: &str, total: u64) -> String {
    let busiest = activity.buckets.iter().map(|bucket| bucket.total()).max().unwrap_or_default();
    let top = nice_ceiling(busiest);
    let plot_height = HEIGHT - TOP - BOTTOM;
    let count = u32::try_from(activity.buckets.len()).unwrap_or(u32::MAX).max(1);
    let slot = (WIDTH - LEFT) / count;
    let bar = (slot * 4 / 5).max(1);
    let mut out = format!(
        "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" aria-labelledby=\"chart-title chart-desc\"><title id=\"chart-title\">Tool calls by verdict, \
         {name}</title><desc id=\"chart-desc\">{}</desc>",
        escape(&describe(activity, total))
    );
    // Gridlines and their labels at 0, half and the top.
    for step in [0, 1, 2] {
        let value = top * step / 2;
        let y = TOP + plot_height - scale(value, top, plot_height);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{y}\" y2=\"{y}\"/><text class=\"axis\" x=\"{}\" \
             y=\"{}\" text-anchor=\"end\">{value}</text>",
            LEFT - 6,
            y + 4
        );
    }
    let every = (activity.buckets.len() / 6).max(1);
    for (index, bucket) in activity.buckets.iter().enumerate() {
        let x = LEFT + u32::try_from(index).unwrap_or_default() * slot + (slot - bar) / 2;
        let mut base = TOP + plot_height;
        for verdict in ActivityVerdict::ALL {
            let value = bucket.count(verdict);
            if value == 0 {
                continue;
            }
            let height = scale(value, top, plot_height).max(1);
            base = base.saturating_sub(height);
            let _ = write!(
                out,
                "<rect class=\"v-{class}\" x=\"{x}\" y=\"{base}\" width=\"{bar}\" height=\"{height}\"><title>{time} \
                 UTC: {value} {what}</title></rect>",
                class = verdict.as_str(),
                time = escape(clock(&bucket.start)),
                what = label(verdict),
            );
        }
        if index % every == 0 {
            let _ = write!(
                out,
                "<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                x + bar / 2,
                HEIGHT - 6,
                escape(clock(&bucket.start))
            );
        }
    }
    out.push_str("</svg></figure>");
    out
}

/// A sentence a screen reader speaks for the chart.
fn describe(activity: &Activity, total: u64) -> String {
    let mut parts = Vec::new();
    for verdict in ActivityVerdict::ALL {
        let sum: u64 = activity.buckets.iter().map(|bucket| bucket.count(verdict)).sum();
        if sum > 0 {
            parts.push(format!("{sum} {}", label(verdict)));
        }
    }
    let busiest = activity.buckets.iter().filter(|bucket| bucket.total() > 0).max_by_key(|bucket| bucket.total());
    match busiest {
        Some(bucket) => format!(
            "{total} calls: {}. Busiest: {} UTC with {}. The table below lists every period with calls.",
            parts.join(", "),
            clock(&bucket.start),
            bucket.total()
        ),
        None => "No tool calls in this period.".to_owned(),
    }
}

fn legend(out: &mut String) {
    out.push_str("<ul class=\"legend\" aria-label=\"Legend\">");
    for verdict in ActivityVerdict::ALL {
        let _ = write!(
            out,
            "<li><span class=\"swatch v-{}\" aria-hidden=\"true\"></span>{}</li>",
            verdict.as_str(),
            label(verdict)
        );
    }
    out.push_str("</ul>");
}

/// The numbers behind the bars: one row per period with calls.
fn table(out: &mut String, activity: &Activity) {
    let busy: Vec<_> = activity.buckets.iter().filter(|bucket| bucket.total() > 0).collect();
    if busy.is_empty() {
        out.push_str("<p>No tool calls in this period.</p>");
        return;
    }
    out.push_str(
        "<details><summary>The numbers as a table</summary><div class=\"table-wrap\"><table id=\"activity-table\">\
         <caption>Calls per period (UTC) with calls</caption><thead><tr><th scope=\"col\">From</th>",
    );
    for verdict in ActivityVerdict::ALL {
        let _ = write!(out, "<th scope=\"col\">{}</th>", label(verdict));
    }
    out.push_str("<th scope=\"col\">All</th></tr></thead><tbody>");
    for bucket in busy {
        let _ = write!(
            out,
            "<tr data-start=\"{}\"><th scope=\"row\">{}</th>",
            escape(&bucket.start),
            escape(clock(&bucket.start))
        );
        for verdict in ActivityVerdict::ALL {
            let _ = write!(out, "<td data-verdict=\"{}\">{}</td>", verdict.as_str(), bucket.count(verdict));
        }
        let _ = write!(out, "<td>{}</td></tr>", bucket.total());
    }
    out.push_str("</tbody></table></div></details>");
}

/// The smallest of 1, 2, 5 × 10ⁿ (at least 5) that is not below `value`, so gridline labels stay round.
fn nice_ceiling(value: u64) -> u64 {
    let mut magnitude = 1;
    loop {
        for factor in [1, 2, 5] {
            let candidate = factor * magnitude;
            if candidate >= value.max(5) {
                return candidate;
            }
        }
        magnitude = magnitude.saturating_mul(10);
    }
}

/// `value` of `top` as a height within `height` units.
fn scale(value: u64, top: u64, height: u32) -> u32 {
    let scaled = value.saturating_mul(u64::from(height)) / top.max(1);
    u32::try_from(scaled).unwrap_or(height).min(height)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_store::ActivityBucket;

    #[test]
    fn ceilings_are_round() {
        for (value, ceiling) in [(0, 5), (3, 5), (4, 5), (5, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, 200)] {
            assert_eq!(nice_ceiling(value), ceiling, "{value}");
        }
        assert_eq!(scale(2, 4, 200), 100);
        assert_eq!(scale(9, 4, 200), 200, "never taller than the plot");
    }

    #[test]
    fn bars_stack_and_say_what_they_count() {
        let mut busy = ActivityBucket { start: "2026-11-25T10:05:00.000000Z".into(), counts: [0; 7] };
        busy.counts[0] = 3;
        busy.counts[4] = 1;
        let quiet = ActivityBucket { start: "2026-11-25T10:06:00.000000Z".into(), counts: [0; 7] };
        let activity = Activity { span: ActivitySpan::LastHour, buckets: vec![busy, quiet] };
        let page = render(&activity, "token");
        assert!(page.contains("<title>10:05 UTC: 3 allowed</title>"), "{page}");
        assert!(page.contains("<title>10:05 UTC: 1 denied</title>"), "{page}");
        assert!(page.contains("4 calls: 3 allowed, 1 denied. Busiest: 10:05 UTC with 4."), "{page}");
        assert!(page.contains("<td data-verdict=\"allow\">3</td>"), "{page}");
        assert!(!page.contains("data-start=\"2026-11-25T10:06"), "empty periods are left out of the table");
        assert!(!page.contains("style="), "no inline styles under the Content-Security-Policy");
    }
}
