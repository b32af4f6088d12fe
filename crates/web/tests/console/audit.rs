//! The audit page: filters by tool, verdict, kind, upstream, caller, time and free text, combined, kept in the
//! form, and an unreadable filter refused with 400.

use crate::{TestResult, login, request, start};

#[tokio::test]
async fn audit_page_filters_by_tool_and_verifies_the_chain() -> TestResult {
    use toolgate_store::{AuditEntry, AuditKind};
    let console = start().await?;
    let audit = console.store.audit();
    for tool in ["read_file", "delete_file", "read_file"] {
        audit.record_durable(AuditEntry { tool: Some(tool.into()), ..AuditEntry::new(AuditKind::Call) }).await?;
    }
    let cookie = login(&console).await?;
    let all = request(console.address, "GET", "/console/audit", std::slice::from_ref(&cookie), "").await?;
    assert_eq!(all.status, 200);
    assert!(all.body.contains("Hash chain verified: 3 rows intact."), "{}", all.body);
    assert!(all.body.contains("delete_file") && all.body.contains("read_file"));
    let filtered = request(console.address, "GET", "/console/audit?tool=delete_*&limit=5", &[cookie], "").await?;
    assert!(filtered.body.contains("delete_file"));
    assert!(!filtered.body.contains("<td>read_file</td>"));
    assert!(filtered.body.contains("value=\"delete_*\""));
    Ok(())
}

#[tokio::test]
async fn audit_page_searches_and_combines_filters_server_side() -> TestResult {
    use toolgate_core::decision::{Reason, Verdict};
    use toolgate_store::{AuditEntry, AuditKind, Caller};
    let console = start().await?;
    let audit = console.store.audit();
    let rows = [
        ("files", "delete_file", "alice", Verdict::Confirm, "destructive, so a person confirms"),
        ("files", "read_file", "bob", Verdict::Allow, "read-only"),
        ("mail", "send_mail", "alice", Verdict::Deny, "mail is off on weekends"),
    ];
    for (upstream, tool, who, verdict, detail) in rows {
        let entry = AuditEntry {
            upstream: Some(upstream.into()),
            tool: Some(tool.into()),
            caller: Some(Caller { identity: Some(who.into()), ..Caller::default() }),
            verdict: Some(verdict),
            reasons: vec![Reason { rule: "rule".into(), detail: detail.into() }],
            ..AuditEntry::new(AuditKind::Decision)
        };
        audit.record_durable(entry).await?;
    }
    let cookie = login(&console).await?;
    let shown = |body: &str| {
        ["delete_file", "read_file", "send_mail"]
            .into_iter()
            .filter(|tool| body.contains(&format!("<td>{tool}</td>")))
            .collect::<Vec<_>>()
    };
    let get = |target: &'static str| request(console.address, "GET", target, std::slice::from_ref(&cookie), "");
    let check = |target: &'static str, expected: &'static [&'static str]| {
        let reply = get(target);
        async move {
            let reply = reply.await?;
            assert_eq!(reply.status, 200, "{target}");
            assert_eq!(shown(&reply.body), expected, "{target}");
            Ok::<_, Box<dyn std::error::Error>>(reply.body)
        }
    };
    check("/console/audit?caller=alice", &["delete_file", "send_mail"]).await?;
    check("/console/audit?upstream=files", &["delete_file", "read_file"]).await?;
    check("/console/audit?verdict=deny", &["send_mail"]).await?;
    check("/console/audit?kind=pin", &[]).await?;
    check("/console/audit?q=WEEKENDS", &["send_mail"]).await?;
    check("/console/audit?q=%27+OR+1%3D1+--", &[]).await?;
    check("/console/audit?since=1h&until=2999-01-01T00:00:00Z", &["delete_file", "read_file", "send_mail"]).await?;
    check("/console/audit?since=2999-01-01T00:00:00Z", &[]).await?;
    let combined = check("/console/audit?q=file&caller=alice&verdict=confirm&kind=decision", &["delete_file"]).await?;
    // The filters in force are drawn again in the form.
    assert!(combined.contains("id=\"q\" name=\"q\" value=\"file\""), "{combined}");
    assert!(combined.contains("id=\"caller\" name=\"caller\" value=\"alice\""));
    assert!(combined.contains("<option value=\"confirm\" selected>confirm</option>"));
    assert!(combined.contains("<option value=\"decision\" selected>decision</option>"));
    assert!(
        combined.contains("<span title=\"destructive, so a person confirms\">rule</span>"),
        "each reason's rule, with its detail as a tooltip"
    );
    // A filter that cannot be read is a 400 naming it, never a silently wider search.
    for (target, says) in [
        ("/console/audit?verdict=maybe", "unknown verdict"),
        ("/console/audit?kind=drop", "unknown kind"),
        ("/console/audit?since=yesterday", "since: cannot read"),
    ] {
        let reply = get(target).await?;
        assert_eq!(reply.status, 400, "{target}");
        assert!(reply.body.contains(says) && shown(&reply.body).is_empty(), "{target}: {}", reply.body);
    }
    Ok(())
}
