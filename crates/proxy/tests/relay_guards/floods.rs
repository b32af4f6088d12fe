//! Issue 10 (review), item 5: requests an upstream sends to clients (elicitation, sampling, roots) are bounded per
//! session and per upstream while they wait for answers; past a bound the upstream gets a JSON-RPC error at once,
//! counted by reason.

use serde_json::{Value, json};
use toolgate_spec::Limits;

use crate::message_of;
use crate::support::{Client, Elicit, FixtureLog, GUARD, start, text_of, upstream};

/// The fixture's log entries that are toolgate's error answers to its requests with ids starting `prefix`.
fn refusals(log: &FixtureLog, prefix: &str) -> Vec<Value> {
    log.entries()
        .into_iter()
        .filter(|entry| entry["id"].as_str().is_some_and(|id| id.starts_with(prefix)) && entry["error"].is_object())
        .collect()
}

async fn wait_refusals(log: &FixtureLog, prefix: &str, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let found = refusals(log, prefix);
        if found.len() >= count {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} of {count} refusals for {prefix}: {found:?}", found.len());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn elicitations(client: &mut Client) -> usize {
    client.drain();
    client.all.iter().map(message_of).filter(|message| message["method"] == "elicitation/create").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relayed_requests_past_the_per_session_and_per_upstream_bounds_are_refused_to_the_upstream() {
    let log = FixtureLog::new();
    let limits =
        Limits { max_relayed_requests_per_session: 3, max_relayed_requests_per_upstream: 4, ..Limits::default() };
    let gateway = start(vec![upstream("faulty", "tool-faults", GUARD, Some(&log.path))], limits).await;

    // The first client holds every question: three reach it, the session's bound refuses two.
    let mut first = Client::connect_with(&gateway, Elicit::Hold).await;
    let asked =
        first.call(json!(1), "faulty_ask_then_cancel", json!({"text": "first", "count": 5, "keep": true})).await;
    assert_eq!(text_of(&asked), "asked 5");
    let id = log.call_id("ask_then_cancel", "first").await;
    let refused = wait_refusals(&log, &format!("ask-{id}"), 2).await;
    assert!(
        refused[0]["error"]["message"].as_str().unwrap().contains("max_relayed_requests_per_session"),
        "{refused:?}"
    );
    // Toolgate answered the refusals after relaying the rest, on the same pipe: the relayed ones are queued now.
    assert_eq!(elicitations(&mut first), 3);

    // The second client finds one place left of the upstream's four.
    let mut second = Client::connect_with(&gateway, Elicit::Hold).await;
    let asked =
        second.call(json!(2), "faulty_ask_then_cancel", json!({"text": "second", "count": 5, "keep": true})).await;
    assert_eq!(text_of(&asked), "asked 5");
    let id = log.call_id("ask_then_cancel", "second").await;
    let refused = wait_refusals(&log, &format!("ask-{id}"), 4).await;
    assert!(
        refused[0]["error"]["message"].as_str().unwrap().contains("max_relayed_requests_per_upstream"),
        "{refused:?}"
    );
    assert_eq!(elicitations(&mut second), 1);

    let metrics = gateway.render_metrics().await;
    for (reason, count) in [("per_session", 2), ("per_upstream", 4)] {
        let series =
            format!("toolgate_relayed_requests_refused_total{{upstream=\"faulty\",reason=\"{reason}\"}} {count}");
        assert!(metrics.contains(&series), "{series} in:\n{metrics}");
    }
    gateway.shutdown().await;
}
