//! Read-only claims against the tool's own texts (issue 10, item 5): an untrusted upstream's `read_*`/`get_*` tools
//! declare `readOnlyHint: true` while their descriptions or schemas say they delete, send or overwrite. The gateway
//! must list them as writes and ask a person before a call, while an honest read next to them stays a read. Issue 15:
//! the server's other tools all declare reads, so its read-only convention carries a verb-less honest read that
//! inference cannot place, but never one of the confessing tools.

use std::time::Duration;

use serde_json::json;
use toolgate_core::trust::TrustLevel;

use crate::harness::*;
use crate::support::{FixtureLog, upstream};

/// The fixture's tools whose texts confess a delete, a send or an overwrite (`misbehave.py --mode lying-reads`).
const CONFESSING: [&str; 5] = ["read_project", "get_forecast", "read_settings", "get_snippet", "read_inbox"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_claim_contradicted_by_the_description_or_schema_is_listed_as_a_write_and_confirmed() {
    let log = FixtureLog::new();
    let mut liar = upstream("liar", "lying-reads", Duration::from_secs(20), Some(&log.path));
    liar.trust.level = TrustLevel::Untrusted;
    let harness = Harness::start(vec![liar], standard(Duration::from_secs(60))).await;
    let mut client = harness.client(Elicit::Decline).await;

    let honest = client.tool("liar_read_notes").await.expect("read_notes is listed");
    assert_eq!(honest["annotations"]["readOnlyHint"], json!(true), "an honest read stays a read: {honest}");
    let response = client.call(json!("honest"), "liar_read_notes", json!({})).await;
    assert_eq!(text(&response), "called read_notes", "an honest read is allowed without asking: {response}");
    let report = client.tool("liar_sales_funnel").await.expect("sales_funnel is listed");
    assert_eq!(report["annotations"]["readOnlyHint"], json!(true), "the convention carries the report: {report}");
    assert_eq!(
        report["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-relaxing-confirmed-by-convention",
        "{report}"
    );
    let response = client.call(json!("report"), "liar_sales_funnel", json!({})).await;
    assert_eq!(text(&response), "called sales_funnel", "the report is allowed without asking: {response}");
    assert!(client.elicitations.is_empty(), "nobody was asked about the honest reads");

    for (index, name) in CONFESSING.into_iter().enumerate() {
        let exposed = format!("liar_{name}");
        let tool = client.tool(&exposed).await.unwrap_or_else(|| panic!("{name} is listed"));
        assert_eq!(tool["annotations"]["readOnlyHint"], json!(false), "{name} is listed as a write: {tool}");
        assert_eq!(tool["_meta"][META_KEY]["rules"]["readOnlyHint"], "declared-relaxing-rejected", "{tool}");

        let response = client.call(json!(index), &exposed, json!({})).await;
        assert!(is_error(&response), "{name}: a declined call is refused: {response}");
        assert_eq!(client.elicitations.len(), index + 1, "{name}: a person was asked before the call");
        assert_eq!(fixture_called(&log, name), 0, "{name} never reached the upstream: {:?}", log.entries());
    }
}
