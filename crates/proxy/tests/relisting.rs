//! Re-listing an upstream, through the gateway: each upstream's run task owns its connection and its re-listing,
//! so two quick `list_changed` never expose a definition that was not checked against its pin, a tools change and a
//! prompts change announced together both reach the client (also when announced by a restarted upstream while it
//! is being listed), a burst of `list_changed` is coalesced and an unchanged re-listing writes no audit row, and an
//! upstream listing more tools than `limits.max_tools_per_upstream` is cut to it, visibly.
//!
//! An in-process gateway in front of `misbehave.py --mode relist`. Waits are hang guards; no test asserts how long
//! anything took.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::policy::PolicySpec;
use toolgate_core::trust::TrustLevel;
use toolgate_proxy::upstreams::UpstreamStatus;
use toolgate_spec::{GatewaySpec, GuardrailSpec, Limits, UpstreamSpec};
use toolgate_store::{AuditFilter, AuditKind, AuditRow, Store};
use toolgate_upstream::Endpoint;

use support::{Client, FixtureLog, GUARD, start_guarded, upstream};

/// A `misbehave.py --mode relist` upstream named (and prefixed) `relist`, listing `fillers` extra tools.
fn relist_upstream(fillers: usize, log: Option<&FixtureLog>, state: Option<&Path>) -> UpstreamSpec {
    let mut spec = upstream("relist", "relist", Duration::from_secs(20), log.map(|log| log.path.as_path()));
    if let Endpoint::Stdio { env, .. } = &mut spec.endpoint {
        env.push(("MISBEHAVE_TOOLS".to_owned(), fillers.to_string()));
        if let Some(state) = state {
            env.push(("MISBEHAVE_STATE".to_owned(), state.to_string_lossy().into_owned()));
        }
    }
    spec
}

/// A started gateway over `upstreams` with `limits` and [`permissive`] guardrails (the listing tests' setup).
async fn start_permissive(
    upstreams: Vec<UpstreamSpec>,
    limits: Limits,
    store: Option<Store>,
) -> toolgate_proxy::Gateway {
    let spec = GatewaySpec { guardrails: permissive(), limits, ..GatewaySpec::new(upstreams) };
    support::start_spec(spec, store).await
}

fn permissive() -> GuardrailSpec {
    GuardrailSpec { policy: PolicySpec::permissive(), ..GuardrailSpec::default() }
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|tool| tool["name"].as_str()).collect()
}

/// The description of the tool or prompt `name` in a `tools/list` or `prompts/list` result's items.
fn description<'a>(items: &'a [Value], name: &str) -> &'a str {
    items.iter().find(|item| item["name"] == name).and_then(|item| item["description"].as_str()).unwrap_or_default()
}

async fn prompts(client: &mut Client) -> Vec<Value> {
    let id = json!(format!("prompts-{}", client.all.len()));
    let response = client.request(id, "prompts/list", json!({})).await;
    response["result"]["prompts"].as_array().cloned().unwrap_or_else(|| panic!("no prompts in {response}"))
}

/// Waits (bounded) until the client sees `update_record` and the `summarize` prompt at `version`.
async fn wait_both_at(client: &mut Client, version: u32) {
    let marker = format!("(version {version})");
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let tools = client.tools().await;
        let prompts = prompts(client).await;
        let tool = description(&tools, "relist_update_record").to_owned();
        let prompt = description(&prompts, "relist_summarize").to_owned();
        if tool.contains(&marker) && prompt.contains(&marker) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "both changes never reached the client at {marker}: the tool says {tool:?}, the prompt {prompt:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `listing` audit rows so far, oldest first.
async fn listing_rows(store: &Store) -> Vec<AuditRow> {
    store.audit().flush().await.unwrap();
    let filter = AuditFilter { kind: Some(AuditKind::Listing), ..AuditFilter::default() };
    store.query_audit(&filter).await.unwrap()
}

/// How many `tools/list` requests the fixture read.
fn tools_lists(log: &FixtureLog) -> usize {
    log.entries().iter().filter(|entry| entry["method"] == "tools/list").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_a_relaxed_definition_or_a_new_tool_never_goes_live_between_two_quick_relistings() {
    // A long list makes each pin check slow, which is what once let the second listing be built into a catalog
    // with the first listing's (clean) quarantine.
    const FILLERS: usize = 150;
    const ROUNDS: usize = 4;
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let mut spec = relist_upstream(FILLERS, None, None);
    spec.trust.level = TrustLevel::Pinned;
    let gateway = start_guarded(vec![spec], permissive(), Some(store.clone())).await;

    // Every tool is new, so all wait for a person; a person pins them all (as `toolgate pins approve` would).
    // (The fixture's prompt waits too, held back; this test is about the tools.)
    let pending: Vec<_> = store
        .pins()
        .list_pending()
        .await
        .unwrap()
        .into_iter()
        .filter(|change| change.proposed.kind == toolgate_store::PinKind::Tool)
        .collect();
    assert_eq!(pending.len(), FILLERS + 3, "every tool waits for review");
    let reviewer = Store::open(state.path()).await.unwrap();
    for change in &pending {
        let proposed = &change.proposed;
        reviewer
            .pins()
            .approve_pending(&proposed.upstream, &proposed.tool, &proposed.fingerprint.whole, "tester")
            .await
            .unwrap();
    }
    let mut client = Client::connect(&gateway).await;
    let deadline = tokio::time::Instant::now() + GUARD;
    while client.tools().await.len() < FILLERS + 3 {
        assert!(tokio::time::Instant::now() < deadline, "the approved tools were never released");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for round in 0..ROUNDS {
        // The upstream announces a change twice: the first listing is unchanged, and right after answering it the
        // upstream makes a pinned write claim read-only and adds new tools, and announces again.
        let relaxed = format!("relist_filler_{round:04}");
        let arguments = json!({"what": "race", "tool": format!("filler_{round:04}"), "new": 40, "tag": round});
        let response = client.call(json!(format!("race-{round}")), "relist_change", arguments).await;
        assert_eq!(support::text_of(&response), "changed: race", "{response}");
        let deadline = tokio::time::Instant::now() + GUARD;
        loop {
            let tools = client.tools().await;
            let new: Vec<&str> = names(&tools).into_iter().filter(|name| name.starts_with("relist_new_")).collect();
            assert!(new.is_empty(), "round {round}: unreviewed new tools went live: {new:?}");
            let Some(tool) = tools.iter().find(|tool| tool["name"] == relaxed.as_str()) else { break };
            assert_eq!(
                tool["annotations"]["readOnlyHint"],
                json!(false),
                "round {round}: the relaxed definition went live unreviewed: {tool}"
            );
            assert!(tokio::time::Instant::now() < deadline, "round {round}: {relaxed} was never quarantined");
        }
    }
    let pending = store.pins().pending("relist", "filler_0000").await.unwrap().expect("the relaxed tool waits");
    assert_eq!(pending.proposed.definition["annotations"]["readOnlyHint"], json!(true));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_tools_change_and_a_prompts_change_announced_together_both_reach_the_client() {
    let gateway = start_guarded(vec![relist_upstream(0, None, None)], permissive(), None).await;
    let mut client = Client::connect(&gateway).await;
    for version in 1..=3 {
        let response = client.call(json!(format!("both-{version}")), "relist_change", json!({"what": "both"})).await;
        assert_eq!(support::text_of(&response), "changed: both", "{response}");
        wait_both_at(&mut client, version).await;
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_changes_announced_by_a_restarted_upstream_while_it_is_being_listed_reach_the_client() {
    let state = tempfile::tempdir().unwrap();
    let gateway = start_guarded(vec![relist_upstream(0, None, Some(state.path()))], permissive(), None).await;
    let mut client = Client::connect(&gateway).await;
    // The upstream exits; the next process changes a tool and a prompt as soon as it answered its first
    // tools/list (while the gateway is still listing its prompts) and announces both.
    let response = client.call(json!("restart"), "relist_change", json!({"what": "restart"})).await;
    assert_eq!(support::text_of(&response), "changed: restart", "{response}");
    wait_both_at(&mut client, 1).await;
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_a_burst_of_list_changed_is_coalesced_and_an_unchanged_relisting_writes_no_audit_row() {
    const BURST: usize = 200;
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let log = FixtureLog::new();
    let gateway = start_guarded(vec![relist_upstream(20, Some(&log), None)], permissive(), Some(store.clone())).await;
    let mut client = Client::connect(&gateway).await;
    let rows_before = listing_rows(&store).await.len();
    assert_eq!(rows_before, 1, "one listing row at start");
    let lists_before = tools_lists(&log);

    // One change announced BURST times, then a second change announced once.
    let response = client.call(json!("burst"), "relist_change", json!({"what": "burst", "count": BURST})).await;
    assert_eq!(support::text_of(&response), "changed: burst", "{response}");
    let response = client.call(json!("describe"), "relist_change", json!({"what": "describe"})).await;
    assert_eq!(support::text_of(&response), "changed: describe", "{response}");
    let deadline = tokio::time::Instant::now() + GUARD;
    while !description(&client.tools().await, "relist_update_record").contains("(version 2)") {
        assert!(tokio::time::Instant::now() < deadline, "the second change never reached the client");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A relisting in flight and at most one waiting: a handful of tools/list, not one per announcement.
    let relists = tools_lists(&log) - lists_before;
    assert!((1..=6).contains(&relists), "{BURST} announcements caused {relists} re-listings");
    // Only the listings whose fingerprints differ from the one before are audited: the two changes.
    let rows = listing_rows(&store).await;
    let added = &rows[rows_before..];
    assert!((1..=2).contains(&added.len()), "{} listing rows for two changes: {added:#?}", added.len());
    for row in added {
        assert_eq!(row.detail.as_ref().unwrap()["trigger"], "list_changed", "{row:?}");
    }
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_an_upstream_listing_more_tools_than_the_maximum_is_cut_to_it_visibly() {
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    // update_record, read_records, the control tool change, then 30 fillers: 33 tools.
    let limits = Limits { max_tools_per_upstream: 10, ..Limits::default() };
    let gateway = start_permissive(vec![relist_upstream(30, None, None)], limits, Some(store.clone())).await;
    let mut client = Client::connect(&gateway).await;
    let tools = client.tools().await;
    assert_eq!(tools.len(), 10, "{:?}", names(&tools));
    assert_eq!(
        &names(&tools)[..4],
        ["relist_update_record", "relist_read_records", "relist_change", "relist_filler_0000"]
    );
    let UpstreamStatus::Ready { tools: served, warning, .. } = support::status_of(&gateway, "relist") else {
        panic!("the upstream is not ready")
    };
    assert_eq!(served, 10);
    let warning = warning.expect("the status says why tools are missing");
    assert!(warning.contains("23 more tools") && warning.contains("max_tools_per_upstream"), "{warning}");
    let metrics = gateway.render_metrics().await;
    assert!(metrics.contains("toolgate_upstream_tools_dropped{upstream=\"relist\"} 23"), "{metrics}");
    let rows = listing_rows(&store).await;
    assert_eq!(rows[0].detail.as_ref().unwrap()["droppedTools"], json!(23), "{rows:#?}");
    assert_eq!(rows[0].detail.as_ref().unwrap()["tools"], json!(10), "{rows:#?}");

    // A re-listing is cut the same way.
    let response = client.call(json!("describe"), "relist_change", json!({"what": "describe"})).await;
    assert_eq!(support::text_of(&response), "changed: describe", "{response}");
    let deadline = tokio::time::Instant::now() + GUARD;
    while !description(&client.tools().await, "relist_update_record").contains("(version 1)") {
        assert!(tokio::time::Instant::now() < deadline, "the change never reached the client");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.tools().await.len(), 10);
    let metrics = gateway.render_metrics().await;
    assert!(metrics.contains("toolgate_upstream_relists_total{upstream=\"relist\"} 1"), "{metrics}");
    assert!(metrics.contains("toolgate_upstream_tools_dropped{upstream=\"relist\"} 23"), "{metrics}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_no_page_of_tools_beyond_the_maximum_is_asked_for() {
    // The paginated fixture lists 3 tools, then 2, then 2, page by page.
    let log = FixtureLog::new();
    let paginated = upstream("pages", "paginated", Duration::from_secs(20), Some(&log.path));
    let limits = Limits { max_tools_per_upstream: 2, ..Limits::default() };
    let gateway = start_permissive(vec![paginated], limits, None).await;
    let mut client = Client::connect(&gateway).await;
    assert_eq!(names(&client.tools().await), ["pages_read_config", "pages_wipe_cache"]);
    let lists: Vec<Value> = log.entries().into_iter().filter(|entry| entry["method"] == "tools/list").collect();
    assert_eq!(lists.len(), 1, "only the first page was asked for: {lists:?}");
    assert!(lists[0]["params"].get("cursor").is_none(), "{lists:?}");
    let UpstreamStatus::Ready { warning, .. } = support::status_of(&gateway, "pages") else {
        panic!("the upstream is not ready")
    };
    let warning = warning.expect("the status says tools are missing");
    assert!(warning.contains("at least 1 more") && warning.contains("not read"), "{warning}");
    gateway.shutdown().await;
}

/// Not a check but a measurement: the gateway's memory (this process: the gateway, its store and one client; the
/// fixture is a child process) once it serves `TOOLGATE_MEASURE_TOOLS` tools of one upstream (default 2000), in its
/// catalog and written to the store's inventory. Run it once with 0 and once with N tools; the difference in
/// `VmRSS` divided by N is what one tool costs:
/// `TOOLGATE_MEASURE_TOOLS=N cargo nextest run -p toolgate-proxy --test relisting --run-ignored only --no-capture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
#[allow(clippy::print_stdout, reason = "the measurement is the output")]
async fn measure_the_memory_each_tool_costs() {
    let count: usize =
        std::env::var("TOOLGATE_MEASURE_TOOLS").ok().and_then(|count| count.parse().ok()).unwrap_or(2000);
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let limits = Limits { max_tools_per_upstream: 100_000, ..Limits::default() };
    let upstreams = vec![relist_upstream(count, None, None)];
    let gateway = start_permissive(upstreams, limits, Some(store.clone())).await;
    // No client lists them: a test client keeps every message it received, which would count here too.
    assert_eq!(gateway.status().tools, count + 3);
    // Let the background inventory write finish.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss, peak) = support::memory_kib();
    println!("tools={} VmRSS={rss} KiB VmHWM={peak} KiB", count + 3);
    gateway.shutdown().await;
}

/// Not a check but a measurement, for issue 10's "400 `list_changed` in 20 s with 2,000 tools": the gateway's CPU
/// time (this process; the fixture is a child), its re-listings and its `listing` audit rows for one change
/// announced 400 times by an upstream with 2,000 tools:
/// `cargo nextest run -p toolgate-proxy --test relisting --run-ignored only --no-capture -E 'test(burst)'`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
#[allow(clippy::print_stdout, reason = "the measurement is the output")]
async fn measure_a_burst_of_list_changed() {
    let cpu_ticks = || {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    let log = FixtureLog::new();
    let limits = Limits { max_tools_per_upstream: 100_000, ..Limits::default() };
    let upstreams = vec![relist_upstream(2000, Some(&log), None)];
    let gateway = start_permissive(upstreams, limits, Some(store.clone())).await;
    let mut client = Client::connect(&gateway).await;
    let (lists, rows, ticks) = (tools_lists(&log), listing_rows(&store).await.len(), cpu_ticks());
    client.call(json!("burst"), "relist_change", json!({"what": "burst", "count": 400})).await;
    client.call(json!("describe"), "relist_change", json!({"what": "describe"})).await;
    // Polls the fixture's log, not the gateway: a client listing 2,000 tools would count here too.
    let deadline = tokio::time::Instant::now() + GUARD;
    while tools_lists(&log) < lists + 2 {
        assert!(tokio::time::Instant::now() < deadline, "no re-listing");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_ticks() - ticks;
    let relists = tools_lists(&log) - lists;
    let added = listing_rows(&store).await.len() - rows;
    let db = std::fs::metadata(state.path().join("toolgate.db")).map(|meta| meta.len()).unwrap_or(0);
    println!(
        "401 announcements: {relists} re-listings, {added} listing rows, {spent} CPU ticks (1/100 s), db {db} bytes"
    );
    assert!(description(&client.tools().await, "relist_update_record").contains("(version 2)"));
    gateway.shutdown().await;
}

/// A `relist` upstream with filler tools and prompts whose descriptions are padded by `padding` bytes each.
fn filler_upstream(tools: usize, prompts: usize, padding: usize) -> UpstreamSpec {
    let mut spec = relist_upstream(tools, None, None);
    if let Endpoint::Stdio { env, .. } = &mut spec.endpoint {
        env.push(("MISBEHAVE_PROMPTS".to_owned(), prompts.to_string()));
        env.push(("MISBEHAVE_FILLER_BYTES".to_owned(), padding.to_string()));
    }
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_review_prompts_beyond_the_item_maximum_are_cut_to_it_visibly() {
    let state = tempfile::tempdir().unwrap();
    let store = support::gateway_store(state.path()).await;
    // summarize, then 30 filler prompts: 31.
    let limits = Limits { max_list_items_per_upstream: 10, ..Limits::default() };
    let gateway = start_permissive(vec![filler_upstream(0, 30, 0)], limits, Some(store.clone())).await;
    let mut client = Client::connect(&gateway).await;
    let listed = prompts(&mut client).await;
    let upstream_prompts: Vec<&str> = names(&listed).into_iter().filter(|name| *name != "toolgate_safety").collect();
    assert_eq!(upstream_prompts.len(), 10, "{upstream_prompts:?}");
    assert_eq!(&upstream_prompts[..2], ["relist_summarize", "relist_filler_prompt_0000"]);
    let UpstreamStatus::Ready { warning, .. } = support::status_of(&gateway, "relist") else {
        panic!("the upstream is not ready")
    };
    let warning = warning.expect("the status says why prompts are missing");
    assert!(warning.contains("21 more prompts") && warning.contains("max_list_items_per_upstream"), "{warning}");
    let metrics = gateway.render_metrics().await;
    let series = "toolgate_upstream_list_items_dropped{upstream=\"relist\",kind=\"prompts\"} 21";
    assert!(metrics.contains(series), "{metrics}");
    let rows = listing_rows(&store).await;
    assert_eq!(rows[0].detail.as_ref().unwrap()["dropped"]["prompts"]["items"], json!(21), "{rows:#?}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_review_tools_beyond_the_byte_maximum_are_cut_whole_and_in_order() {
    // update_record, read_records, change (a few hundred bytes each), then 20 fillers of about 20 kB each: within
    // 100 kB fit the three and four fillers, never part of a fifth.
    let limits = Limits { max_listing_bytes_per_upstream: 100_000, ..Limits::default() };
    let gateway = start_permissive(vec![filler_upstream(20, 0, 20_000)], limits, None).await;
    let mut client = Client::connect(&gateway).await;
    let tools = client.tools().await;
    assert_eq!(
        names(&tools),
        [
            "relist_update_record",
            "relist_read_records",
            "relist_change",
            "relist_filler_0000",
            "relist_filler_0001",
            "relist_filler_0002",
            "relist_filler_0003"
        ]
    );
    assert!(description(&tools, "relist_filler_0003").ends_with(&"x".repeat(100)), "a tool is served whole");
    let UpstreamStatus::Ready { warning, .. } = support::status_of(&gateway, "relist") else {
        panic!("the upstream is not ready")
    };
    let warning = warning.expect("the status says why tools are missing");
    assert!(warning.contains("16 more tools") && warning.contains("max_listing_mib_per_upstream"), "{warning}");
    let metrics = gateway.render_metrics().await;
    assert!(
        metrics.contains("toolgate_upstream_list_items_dropped{upstream=\"relist\",kind=\"tools\"} 16"),
        "{metrics}"
    );
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_review_a_re_listing_that_times_out_is_retried_so_the_change_is_not_lost() {
    let mut spec = relist_upstream(0, None, None);
    // The unanswered tools/list fails after this long; the retry then finds the upstream answering.
    spec.request_timeout = Duration::from_secs(2);
    let gateway = start_guarded(vec![spec], permissive(), None).await;
    let mut client = Client::connect(&gateway).await;
    assert!(!description(&client.tools().await, "relist_update_record").contains("(version"));

    let response = client.call(json!("stall"), "relist_change", json!({"what": "stall"})).await;
    assert_eq!(support::text_of(&response), "changed: stall", "{response}");
    let deadline = tokio::time::Instant::now() + GUARD;
    while !description(&client.tools().await, "relist_update_record").contains("(version 1)") {
        assert!(tokio::time::Instant::now() < deadline, "the change was lost with the failed re-listing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = gateway.render_metrics().await;
    assert!(metrics.contains("toolgate_upstream_relist_failures_total{upstream=\"relist\"} 1"), "{metrics}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_10_review_no_page_beyond_the_byte_maximum_is_asked_for() {
    // The paginated fixture lists 3 tools, then 2, then 2; a 1-byte maximum is reached by the first page's first tool.
    let log = FixtureLog::new();
    let paginated = upstream("pages", "paginated", Duration::from_secs(20), Some(&log.path));
    let limits = Limits { max_listing_bytes_per_upstream: 1, ..Limits::default() };
    let gateway = start_permissive(vec![paginated], limits, None).await;
    let mut client = Client::connect(&gateway).await;
    assert!(client.tools().await.is_empty(), "no tool is served in part");
    let lists: Vec<Value> = log.entries().into_iter().filter(|entry| entry["method"] == "tools/list").collect();
    assert_eq!(lists.len(), 1, "only the first page was asked for: {lists:?}");
    let UpstreamStatus::Ready { warning, .. } = support::status_of(&gateway, "pages") else {
        panic!("the upstream is not ready")
    };
    let warning = warning.expect("the status says tools are missing");
    assert!(warning.contains("at least 3 more tools") && warning.contains("not read"), "{warning}");
    gateway.shutdown().await;
}
