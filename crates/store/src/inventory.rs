//! The tool inventory: every tool each upstream lists, as the gateway last saw it (effective hints with their
//! sources, toolgate's `_meta` record, risk, lint findings, fingerprint, whether clients see it, and what the policy
//! would do with a call for each configured caller).
//!
//! The gateway writes it whenever it rebuilds its catalog ([`Store::replace_inventory`], one transaction per
//! upstream, so a reader never sees half a listing; [`Store::retain_inventory`] drops upstreams no longer
//! configured); the console reads it ([`Store::inventory`]). Several processes sharing a store each keep their own
//! view, under their instance id ([`Store::inventory_by_instance`]); [`Store::inventory`] merges them, each tool as
//! the process that listed it last saw it. It is a snapshot
//! for people, never an input to a decision: the relay decides from its own catalog, and nothing here is hashed or
//! chained.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::QueryBuilder;

use toolgate_core::decision::Verdict;

use crate::Store;
use crate::approvals::ToolRisk;
use crate::backend::{Columns, on_backend};
use crate::error::StoreError;
use crate::heartbeat;
use crate::time::format_rfc3339;

/// Whether clients see a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InventoryState {
    /// In the catalog clients list (policy and selection profiles may still hide it from some callers).
    Visible,
    /// Its definition changed since it was pinned and waits for a person.
    Quarantined,
    /// Listed by the upstream but not offered to clients (`state_reason` says why).
    Hidden,
}

impl InventoryState {
    /// The stable name stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            InventoryState::Visible => "visible",
            InventoryState::Quarantined => "quarantined",
            InventoryState::Hidden => "hidden",
        }
    }

    fn parse(text: &str) -> Result<InventoryState, StoreError> {
        [InventoryState::Visible, InventoryState::Quarantined, InventoryState::Hidden]
            .into_iter()
            .find(|state| state.as_str() == text)
            .ok_or_else(|| StoreError::Corrupt { what: "inventory state", detail: text.to_owned() })
    }
}

/// One lint finding about a tool (from `toolgate_core::lint`), as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryFinding {
    /// The rule's code (`TG101`).
    pub code: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// What is wrong, in one line.
    pub message: String,
}

/// What the policy would do with a call of a tool for one caller identity (an untainted session, without a
/// quarantine bump unless the tool is quarantined), as the gateway computed it when it wrote the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryAccess {
    /// The caller's configured name (`[[caller]]`, the stdio identity, or `anonymous`).
    pub caller: String,
    /// The verdict: `hide` means the caller does not see the tool at all.
    pub verdict: Verdict,
    /// The rule that decided it.
    pub rule: String,
}

/// One tool of one upstream.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventoryTool {
    /// The upstream's configured name.
    pub upstream: String,
    /// The tool's name at the upstream.
    pub tool: String,
    /// The name clients see (with the upstream's prefix, if any).
    pub exposed_name: String,
    /// What a person reads as its title.
    pub title: String,
    /// Whether clients see it.
    pub state: InventoryState,
    /// Why it is hidden or quarantined, when it is.
    pub state_reason: Option<String>,
    /// The effective hints with their sources, as JSON (`{"readOnlyHint": {"value": true, "source": "declared"}}`,
    /// the same shape as a pin's).
    pub hints: Value,
    /// `_meta["toolgate/annotations"]` as the gateway emits it (trust, sources, rules, category, risk, action).
    pub annotations: Value,
    /// Risk level and category.
    pub risk: ToolRisk,
    /// Lint findings, most severe first.
    pub findings: Vec<InventoryFinding>,
    /// What the policy would do with a call, per configured caller, in config order.
    pub access: Vec<InventoryAccess>,
    /// `sha256:` fingerprint of the definition the upstream sent.
    pub fingerprint: String,
    /// When the gateway wrote this row (RFC 3339); set by the store, ignored on write.
    pub updated_at: String,
}

impl InventoryTool {
    /// Why this definition is not one a person may pin in bulk as "agreeing" (`toolgate pins approve --upstream NAME
    /// --agreeing`, the console's "pin the agreeing ones"); empty when it agrees. A definition agrees when it declares
    /// hints, the trust rule accepted every declared hint that relaxes (`declared-relaxing-rejected` on none: inference
    /// supports what it claims) and lint found no error. It reads the gateway's own record of the tool (`rules` in
    /// `annotations`, `findings`), so it judges exactly what the gateway enforced for this fingerprint.
    pub fn disagreements(&self) -> Vec<String> {
        let rules = self.annotations.get("rules").and_then(Value::as_object);
        let mut reasons = Vec::new();
        let declares = rules.is_some_and(|rules| {
            rules.values().any(|rule| rule.as_str().is_some_and(|rule| rule.starts_with("declared")))
        });
        if !declares {
            reasons.push("declares no hints: there is nothing for inference to agree with".to_owned());
        }
        for (hint, rule) in rules.into_iter().flatten() {
            if rule.as_str() == Some("declared-relaxing-rejected") {
                reasons
                    .push(format!("declares {hint} more relaxed than inference supports (the trust rule rejected it)"));
            }
        }
        for finding in self.findings.iter().filter(|finding| finding.severity == "error") {
            reasons.push(format!("lint {}: {}", finding.code, finding.message));
        }
        reasons
    }
}

fn to_json<T: Serialize>(value: &T, what: &'static str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Json { what, source })
}

fn from_json<T: serde::de::DeserializeOwned>(row: &impl Columns, column: &'static str) -> Result<T, StoreError> {
    let text: String = row.column(column)?;
    serde_json::from_str(&text).map_err(|source| StoreError::Json { what: column, source })
}

fn decode(row: &impl Columns) -> Result<InventoryTool, StoreError> {
    let state: String = row.column("state")?;
    let level: i64 = row.column("risk_level")?;
    Ok(InventoryTool {
        upstream: row.column("upstream")?,
        tool: row.column("tool")?,
        exposed_name: row.column("exposed_name")?,
        title: row.column("title")?,
        state: InventoryState::parse(&state)?,
        state_reason: row.column("state_reason")?,
        hints: from_json(row, "hints")?,
        annotations: from_json(row, "annotations")?,
        risk: ToolRisk {
            level: u8::try_from(level)
                .map_err(|_| StoreError::Corrupt { what: "inventory risk level", detail: level.to_string() })?,
            category: row.column("risk_category")?,
        },
        findings: from_json(row, "findings")?,
        access: from_json(row, "access")?,
        fingerprint: row.column("fingerprint")?,
        updated_at: row.column("updated_at")?,
    })
}

/// The columns [`decode`] reads, from `tool_inventory t` (a macro so statements stay `&'static str` literals).
macro_rules! inventory_columns {
    () => {
        "t.upstream, t.tool, t.exposed_name, t.title, t.state, t.state_reason, t.hints, t.annotations, t.risk_level, \
         t.risk_category, t.findings, t.access, t.fingerprint, t.updated_at"
    };
}

impl Store {
    /// Replaces everything this process recorded for `upstream` with `tools` (its current listing, in listing order),
    /// in one transaction. An empty `tools` records that the upstream lists no tools.
    pub async fn replace_inventory(&self, upstream: &str, tools: &[InventoryTool]) -> Result<(), StoreError> {
        on_backend!(&self.backend, |pool| {
            let now = format_rfc3339(SystemTime::now());
            let mut transaction = pool.begin().await?;
            let instance = self.instance.as_deref().unwrap_or_default();
            sqlx::query("DELETE FROM tool_inventory WHERE upstream = $1 AND instance = $2")
                .bind(upstream)
                .bind(instance)
                .execute(&mut *transaction)
                .await?;
            for (position, tool) in tools.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO tool_inventory (upstream, tool, position, exposed_name, title, state, state_reason, \
                     hints, annotations, risk_level, risk_category, findings, access, fingerprint, updated_at, \
                     instance) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
                )
                .bind(upstream)
                .bind(&tool.tool)
                .bind(i64::try_from(position).unwrap_or(i64::MAX))
                .bind(&tool.exposed_name)
                .bind(&tool.title)
                .bind(tool.state.as_str())
                .bind(&tool.state_reason)
                .bind(to_json(&tool.hints, "inventory hints")?)
                .bind(to_json(&tool.annotations, "inventory annotations")?)
                .bind(i64::from(tool.risk.level))
                .bind(&tool.risk.category)
                .bind(to_json(&tool.findings, "inventory findings")?)
                .bind(to_json(&tool.access, "inventory access")?)
                .bind(&tool.fingerprint)
                .bind(&now)
                .bind(instance)
                .execute(&mut *transaction)
                .await?;
            }
            transaction.commit().await?;
            Ok::<(), StoreError>(())
        })?;
        // Writing a listing is a sign of life: the merged view counts this process's rows from now on.
        self.heartbeat().await
    }

    /// Drops this process's rows of every upstream not named in `upstreams` (one removed from its config), in one
    /// statement. Other processes' rows are theirs: their configs may still name the upstream.
    pub async fn retain_inventory(&self, upstreams: &[&str]) -> Result<(), StoreError> {
        let instance = self.instance.as_deref().unwrap_or_default();
        on_backend!(&self.backend, |pool| {
            let mut sql = QueryBuilder::new("DELETE FROM tool_inventory WHERE instance = ");
            sql.push_bind(instance);
            if !upstreams.is_empty() {
                sql.push(" AND upstream NOT IN (");
                let mut names = sql.separated(", ");
                for upstream in upstreams {
                    names.push_bind(*upstream);
                }
                sql.push(")");
            }
            sql.build().execute(pool).await?;
            Ok(())
        })
    }

    /// Every recorded tool, by upstream name, then in each upstream's listing order: the merged view of the
    /// processes sharing the store that are alive (this one, and every instance whose heartbeat is within
    /// [`heartbeat::HEARTBEAT_STALE`]), each tool as it was written last by one of them. A stopped process's tools leave
    /// the view once its heartbeat goes stale.
    pub async fn inventory(&self) -> Result<Vec<InventoryTool>, StoreError> {
        let own = self.instance.as_deref().unwrap_or_default();
        let cutoff = heartbeat::alive_cutoff(heartbeat::database_now(&self.backend).await?, heartbeat::HEARTBEAT_STALE);
        on_backend!(&self.backend, |pool| {
            let rows = sqlx::query(concat!(
                "WITH live AS (SELECT * FROM tool_inventory l WHERE l.instance = $1 OR EXISTS \
                 (SELECT 1 FROM instance_heartbeats h WHERE h.instance = l.instance AND h.seen_us >= $2)) \
                 SELECT ",
                inventory_columns!(),
                " FROM live t WHERE NOT EXISTS (SELECT 1 FROM live n \
                 WHERE n.upstream = t.upstream AND n.tool = t.tool \
                 AND (n.updated_at > t.updated_at OR (n.updated_at = t.updated_at AND n.instance > t.instance))) \
                 ORDER BY t.upstream, t.position"
            ))
            .bind(own)
            .bind(cutoff)
            .fetch_all(pool)
            .await?;
            rows.iter().map(decode).collect()
        })
    }

    /// Each process's own view: every recorded tool with the instance id of the process that listed it (empty for
    /// rows written before instance ids), by instance, upstream, then listing order.
    pub async fn inventory_by_instance(&self) -> Result<Vec<(String, InventoryTool)>, StoreError> {
        on_backend!(&self.backend, |pool| {
            let rows = sqlx::query(concat!(
                "SELECT ",
                inventory_columns!(),
                ", t.instance FROM tool_inventory t ORDER BY t.instance, t.upstream, t.position"
            ))
            .fetch_all(pool)
            .await?;
            rows.iter().map(|row| Ok((row.column::<String>("instance")?, decode(row)?))).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(upstream: &str, name: &str, state: InventoryState) -> InventoryTool {
        InventoryTool {
            upstream: upstream.into(),
            tool: name.into(),
            exposed_name: format!("{upstream}_{name}"),
            title: name.into(),
            state,
            state_reason: (state == InventoryState::Hidden).then(|| "name collision".to_owned()),
            hints: json!({"readOnlyHint": {"value": false, "source": "inferred"}}),
            annotations: json!({"upstream": upstream, "risk": 4}),
            risk: ToolRisk { level: 4, category: "destructive".into() },
            findings: vec![InventoryFinding {
                code: "TG101".into(),
                severity: "warning".into(),
                message: "no destructiveHint".into(),
            }],
            access: vec![
                InventoryAccess {
                    caller: "alice".into(),
                    verdict: Verdict::Confirm,
                    rule: "confirm-destructive".into(),
                },
                InventoryAccess { caller: "ci".into(), verdict: Verdict::Hide, rule: "mode-read-only".into() },
            ],
            fingerprint: "sha256:ab".into(),
            updated_at: String::new(),
        }
    }

    #[tokio::test]
    async fn replacing_one_upstream_keeps_the_others_and_the_listing_order() -> Result<(), StoreError> {
        let directory = tempfile::tempdir().map_err(|source| StoreError::StateDir { path: "tmp".into(), source })?;
        let store = Store::open(directory.path()).await?;
        assert!(store.inventory().await?.is_empty());
        let notes = [tool("notes", "zeta", InventoryState::Visible), tool("notes", "alpha", InventoryState::Hidden)];
        store.replace_inventory("notes", &notes).await?;
        store.replace_inventory("files", &[tool("files", "read", InventoryState::Quarantined)]).await?;
        let names = |tools: Vec<InventoryTool>| {
            tools.into_iter().map(|tool| format!("{}/{}", tool.upstream, tool.tool)).collect::<Vec<_>>()
        };
        assert_eq!(names(store.inventory().await?), ["files/read", "notes/zeta", "notes/alpha"]);

        let read = store.inventory().await?;
        let zeta = &read[1];
        assert_eq!((&zeta.hints, &zeta.annotations), (&notes[0].hints, &notes[0].annotations));
        assert_eq!((zeta.risk.level, zeta.findings.len(), zeta.state), (4, 1, InventoryState::Visible));
        assert_eq!(zeta.access, notes[0].access, "each caller's verdict and rule come back in order");
        assert_eq!(read[2].state_reason.as_deref(), Some("name collision"));
        assert!(zeta.updated_at.ends_with('Z'), "{}", zeta.updated_at);

        // A new listing of `notes` replaces all of its rows and no other upstream's.
        store.replace_inventory("notes", &[tool("notes", "beta", InventoryState::Visible)]).await?;
        assert_eq!(names(store.inventory().await?), ["files/read", "notes/beta"]);
        store.replace_inventory("notes", &[]).await?;
        assert_eq!(names(store.inventory().await?), ["files/read"]);

        // An upstream no longer configured loses its rows; the others keep theirs.
        store.replace_inventory("notes", &[tool("notes", "beta", InventoryState::Visible)]).await?;
        store.retain_inventory(&["notes", "mail"]).await?;
        assert_eq!(names(store.inventory().await?), ["notes/beta"]);
        store.retain_inventory(&[]).await?;
        assert!(store.inventory().await?.is_empty(), "no upstream configured: nothing kept");
        store.close().await
    }
}
