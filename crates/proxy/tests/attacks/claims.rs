//! Read-only claims against the tool's own texts (issue 10, item 5): an untrusted upstream's `read_*`/`get_*` tools
//! declare `readOnlyHint: true` while their descriptions or schemas say they delete, send or overwrite. The gateway
//! must list them as writes and ask a person before a call, while an honest read next to them stays a read. Issue 15:
//! the server's other tools all declare reads, yet that read-only convention never carries one of the confessing
//! tools, nor a vague one inference leans to a write for (a listing padded with honest reads must not vouch for a
//! risky tool).

use std::time::Duration;

use serde_json::json;
use toolgate_core::trust::TrustLevel;

use crate::harness::*;
use crate::support::{FixtureLog, upstream};

/// The fixture's tools that must stay writes (`misbehave.py --mode lying-reads`): five whose texts confess a delete,
/// a send or an overwrite, and two vague ones (`nightly`, `housekeeping`) that inference leans to a write for, which
/// the server's honest reads around them must not carry (a listing padded with reads votes for one risky tool).
const STAYS_A_WRITE: [&str; 7] =
    ["read_project", "get_forecast", "read_settings", "get_snippet", "read_inbox", "nightly", "housekeeping"];

/// The fixture's honest reads the gateway must keep as reads. `forum_search_posts`, `net_stats_conversations` and
/// `search_messages` were inferred writes before their names were read by position (issue 15, fourth round: `posts`
/// and `messages` are the plural objects of `search`, not the verbs `post` and `message`; a verb-less name that
/// names its result, `stats`, reads wherever the noun stands), so the server's own read-only convention could not
/// back them either. `sales_funnel` is verb-less, so the rules find no cue in it (only their prior, which assumes a
/// write), as in `nightly`; since issue 15's fifth round the learned layer decides such a tool alone when it is
/// confident (0.8), and it reads `counts of leads ... this month` as a report while it stays unsure of `nightly`
/// and `housekeeping`, which therefore keep waiting for a person.
const HONEST_READS: [&str; 5] =
    ["read_notes", "forum_search_posts", "net_stats_conversations", "search_messages", "sales_funnel"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_claim_contradicted_by_the_description_or_schema_is_listed_as_a_write_and_confirmed() {
    let log = FixtureLog::new();
    let mut liar = upstream("liar", "lying-reads", Duration::from_secs(20), Some(&log.path));
    liar.trust.level = TrustLevel::Untrusted;
    let harness = Harness::start(vec![liar], standard(Duration::from_secs(60))).await;
    let mut client = harness.client(Elicit::Decline).await;

    for name in HONEST_READS {
        let exposed = format!("liar_{name}");
        let honest = client.tool(&exposed).await.unwrap_or_else(|| panic!("{name} is listed"));
        assert_eq!(honest["annotations"]["readOnlyHint"], json!(true), "an honest read stays a read: {honest}");
        let response = client.call(json!(name), &exposed, json!({})).await;
        assert_eq!(text(&response), format!("called {name}"), "an honest read is allowed without asking: {response}");
    }
    assert!(client.elicitations.is_empty(), "nobody was asked about the honest reads");

    for (index, name) in STAYS_A_WRITE.into_iter().enumerate() {
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
