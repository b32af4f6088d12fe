//! A flood of bad tokens through `toolgate serve`: each is refused and counted, but they write at most one audit
//! row per reason and address per second (each row saying how many it stands for), so the bounded audit queue
//! keeps room for everything else; a valid call right after has all its rows. Also, beside a static caller,
//! `check-config` and the console's inventory name the OAuth tokens as callers.

use toolgate_core::decision::Verdict;
use toolgate_store::AuditKind;
use toolgate_test_support::oidc::generate_keys;
use toolgate_test_support::toolgate::raw_http::sample;

use super::{Scene, identity, jwt_provider};

/// How many bad tokens the flood sends, one connection each.
const FLOOD: u64 = 400;

/// How many refusals a refusal row stands for: itself and the ones it says were left out before it.
fn stands_for(outcome: &str) -> u64 {
    let more = outcome
        .split("(and ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .map_or(0, |count| count.parse::<u64>().unwrap());
    1 + more
}

#[test]
fn a_flood_of_bad_tokens_writes_few_rows_and_a_valid_call_keeps_all_of_its_own() {
    let keys = generate_keys(&["RS256"]);
    let scene = Scene::start(|resource| jwt_provider(&keys, resource), "", &[]);
    let token = scene.provider.service_token("svc", "svc-secret", "tools:call", &scene.resource);
    scene.assert_accepted(&token);

    for index in 0..FLOOD {
        let reply = scene.call(&format!("not-a-token-{index}"));
        assert_eq!(reply.status, 401, "{}", reply.body);
    }
    scene.assert_accepted(&token);

    // The valid calls' rows are all there, naming the service.
    let calls = scene.audit_when(AuditKind::Call, |rows| rows.len() >= 2);
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls.iter().all(|row| identity(row).as_deref() == Some("svc")), "{calls:#?}");
    // Every refusal is counted; the rows written and the ones left out add up to the flood.
    let metrics = scene.metrics();
    let refused = sample(&metrics, "toolgate_authentication_refused_total{reason=\"opaque_token\"}");
    let suppressed = sample(&metrics, "toolgate_authentication_rows_suppressed_total{reason=\"opaque_token\"}");
    assert_eq!(refused, FLOOD, "{metrics}");
    let rows = scene.audit_when(AuditKind::Authentication, |rows| rows.len() as u64 + suppressed >= FLOOD);
    let rows: Vec<_> = rows.iter().filter_map(|row| row.outcome.clone()).collect();
    assert!(rows.iter().all(|outcome| outcome.starts_with("refused: opaque_token")), "{rows:#?}");
    assert_eq!(rows.len() as u64 + suppressed, FLOOD, "{rows:#?}");
    assert!((rows.len() as u64) < FLOOD / 2, "the flood was not bounded: {} rows", rows.len());
    // The rows say how many they stand for; the ones after the last row are only in the metrics.
    let told: u64 = rows.iter().map(|outcome| stands_for(outcome)).sum();
    assert!(told <= FLOOD && told >= rows.len() as u64, "{rows:#?}");

    // With OAuth the inventory's callers are the static one and a token holder.
    let ops = ("ops".to_owned(), Verdict::Allow);
    assert_eq!(scene.inventory_access("list_notes"), [ops, ("any OAuth caller".to_owned(), Verdict::Allow)]);
    let checked = scene.check_config();
    assert!(checked.contains("callers:\n  ops (no scopes)\n  OAuth access tokens from"), "{checked}");
}
