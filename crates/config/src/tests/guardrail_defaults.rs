//! Guardrail defaults and lowering: trust, policy, confirmation, pins, results, retries, audit, callers,
//! selection, scopes, and what the summary shows and warns about.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolgate_core::fingerprint::digest_bytes;
use toolgate_core::policy::{DefaultProfile, Mode, PolicySpec, Verdict};
use toolgate_core::trust::TrustLevel;
use toolgate_spec::{
    AuditSpec, CallerSpec, ConfirmVia, ConfirmationSpec, GatewaySpec, ManifestSpec, ModernConfirm, PinSpec, Quarantine,
    ResultSpec, RetrySpec, SelectionSpec, UpstreamTrust,
};

use super::errors::test_env;
use crate::{CallerSummary, ConfigSummary, ListenerSummary, check_config_text, parse_config_with_env};

const ONE: &str = "[[upstream]]\nname = \"git\"\ncommand = \"uvx\"\n";
const KEY: &str = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

fn parse(text: &str) -> GatewaySpec {
    parse_config_with_env(text, Path::new("conf/gateway.toml"), &test_env).unwrap()
}

fn summary(text: &str) -> ConfigSummary {
    check_config_text(text, Path::new("gateway.toml"), &test_env).unwrap()
}

fn warnings(text: &str) -> Vec<String> {
    summary(text).warnings.iter().map(ToString::to_string).collect()
}

#[test]
fn without_guardrail_sections_the_defaults_apply() {
    let spec = parse(ONE);
    assert_eq!(spec.upstreams[0].trust, UpstreamTrust::default());
    assert_eq!(spec.upstreams[0].trust.level, TrustLevel::Untrusted);
    assert_eq!(spec.upstreams[0].trust.min_confidence, 0.8);
    let guardrails = spec.guardrails;
    assert_eq!(guardrails.policy, PolicySpec::default());
    assert_eq!(
        guardrails.confirmation,
        ConfirmationSpec {
            via: ConfirmVia::ElicitationWhenAvailable,
            timeout: Duration::from_secs(120),
            approval_ttl: Duration::from_secs(300),
            remember_for_session: true,
            modern: ModernConfirm::Auto,
            console_url: None,
        }
    );
    assert_eq!(guardrails.pins, PinSpec { quarantine: Quarantine::Hide });
    assert_eq!(guardrails.results, ResultSpec { max_text_chars: 25_000, strip_undeclared_structured: false });
    assert_eq!(guardrails.retries, RetrySpec { max_attempts: 3, initial_backoff: Duration::from_millis(200) });
    assert_eq!(guardrails.audit, AuditSpec::default());
    assert!(guardrails.callers.is_empty());
    assert_eq!(guardrails.selection, SelectionSpec::default());
}

#[test]
fn empty_sections_mean_the_defaults_too() {
    let spec = parse(&format!(
        "{ONE}[policy]\n[confirmation]\n[pins]\n[results]\n[retries]\n[audit]\n[selection]\n[listen.stdio]\n"
    ));
    assert_eq!(spec.guardrails.policy, PolicySpec::default());
    assert_eq!(spec.guardrails.confirmation, ConfirmationSpec::default());
    assert_eq!(spec.guardrails.results, ResultSpec::default());
    assert_eq!(spec.guardrails.retries, RetrySpec::default());
    assert_eq!(spec.guardrails.selection, SelectionSpec::default());
    assert!(spec.stdio.unwrap().scopes.is_empty());
}

#[test]
fn trust_levels_and_manifests_are_lowered() {
    let spec = parse(&format!(
        "{ONE}trust = \"verified\"\n[upstream.manifest]\npath = \"manifests/git.json\"\npublic_keys = [\"{KEY}\"]\n\
         [[upstream]]\nname = \"mem\"\ncommand = \"npx\"\ntrust = \"pinned\"\n\
         [[upstream]]\nname = \"web\"\nurl = \"https://web.example/mcp\"\nmin_confidence = 0.95\n"
    ));
    let trust: Vec<&UpstreamTrust> = spec.upstreams.iter().map(|upstream| &upstream.trust).collect();
    assert_eq!(trust[0].level, TrustLevel::Verified);
    assert_eq!(
        trust[0].manifest,
        Some(ManifestSpec { path: PathBuf::from("conf/manifests/git.json"), public_keys: vec![KEY.to_owned()] })
    );
    assert_eq!((trust[1].level, trust[1].manifest.clone()), (TrustLevel::Pinned, None));
    assert_eq!((trust[2].level, trust[2].min_confidence), (TrustLevel::Untrusted, 0.95));
    let absolute = parse(&format!(
        "{ONE}trust = \"verified\"\nmanifest = {{ path = \"/etc/toolgate/git.json\", public_keys = [\"{KEY}\"] }}\n"
    ));
    assert_eq!(absolute.upstreams[0].trust.manifest.as_ref().unwrap().path, PathBuf::from("/etc/toolgate/git.json"));
}

#[test]
fn policy_is_deserialized_through_the_core_types() {
    let spec = parse(&format!(
        "{ONE}[policy]\nmode = \"read-only\"\ndefaults = \"none\"\nsession_taint = false\n\
         [[policy.rule]]\nid = \"git-deletes\"\neffect = \"confirm\"\n\
         match = {{ upstream = \"git\", tool = [\"delete_*\", \"*_delete\"], destructive = true }}\n\
         [[policy.rule]]\neffect = \"deny\"\nreason = \"admins only\"\nmatch.tool = \"*admin*\"\n\
         match.missing_scopes = \"admin\"\n"
    ));
    let policy = &spec.guardrails.policy;
    assert_eq!((policy.mode, policy.defaults, policy.session_taint), (Mode::ReadOnly, DefaultProfile::None, false));
    assert_eq!(policy.rules.len(), 2);
    assert_eq!(policy.rules[0].id.as_deref(), Some("git-deletes"));
    assert_eq!(policy.rules[0].effect, Verdict::Confirm);
    assert_eq!(policy.rules[0].matches.tool, Some(vec!["delete_*".to_owned(), "*_delete".to_owned()]));
    assert_eq!(policy.rules[0].matches.destructive, Some(true));
    assert_eq!(policy.rules[1].id, None);
    assert_eq!(policy.rules[1].reason.as_deref(), Some("admins only"));
    assert_eq!(policy.rules[1].matches.missing_scopes, Some(vec!["admin".to_owned()]));
    assert!(toolgate_core::policy::compile(policy).is_ok());
}

#[test]
fn confirmation_pins_results_retries_audit_and_selection_are_lowered() {
    let spec = parse(&format!(
        "{ONE}[confirmation]\nvia = \"queue\"\ntimeout_seconds = 60\napproval_ttl_seconds = 900\n\
         remember_for_session = false\nmodern = \"console\"\nconsole_url = \"https://gate.example.com/console/\"\n[pins]\nquarantine = \"confirm\"\n\
         [results]\nmax_text_chars = 4000\nstrip_undeclared_structured = true\n\
         [retries]\nmax_attempts = 1\ninitial_backoff_ms = 50\n[audit]\narguments = \"digest\"\n\
         [selection]\nmax_tools = 40\nexclude_destructive = true\nalways_include = [\"git_status\", \"search_*\"]\n"
    ));
    let guardrails = spec.guardrails;
    assert_eq!(
        guardrails.confirmation,
        ConfirmationSpec {
            via: ConfirmVia::Queue,
            timeout: Duration::from_secs(60),
            approval_ttl: Duration::from_secs(900),
            remember_for_session: false,
            modern: ModernConfirm::Console,
            console_url: Some("https://gate.example.com/console".to_owned()),
        }
    );
    assert_eq!(guardrails.pins.quarantine, Quarantine::ConfirmOnly);
    assert_eq!(guardrails.results, ResultSpec { max_text_chars: 4000, strip_undeclared_structured: true });
    assert_eq!(guardrails.retries, RetrySpec { max_attempts: 1, initial_backoff: Duration::from_millis(50) });
    assert!(!guardrails.audit.arguments_in_clear);
    assert_eq!(
        guardrails.selection,
        SelectionSpec {
            max_tools: Some(40),
            exclude_destructive: true,
            always_include: vec!["git_status".into(), "search_*".into()],
        }
    );
    let elicitation = parse(&format!("{ONE}[confirmation]\nvia = \"elicitation\"\n"));
    assert_eq!(elicitation.guardrails.confirmation.via, ConfirmVia::ElicitationWhenAvailable);
}

#[test]
fn callers_are_stored_as_digests_and_token_env_is_hashed_at_once() {
    let digest = format!("sha256:{}", "0f".repeat(32));
    let spec = parse(&format!(
        "{ONE}[[caller]]\nname = \"alice\"\ntoken_sha256 = \"{digest}\"\nscopes = [\"tools\", \"admin\"]\n\
         [[caller]]\nname = \"ci\"\ntoken_env = \"SEARCH_TOKEN\"\n[listen.stdio]\nscopes = [\"tools\"]\n"
    ));
    assert_eq!(
        spec.guardrails.callers,
        [
            CallerSpec { name: "alice".into(), token_sha256: digest, scopes: vec!["tools".into(), "admin".into()] },
            CallerSpec { name: "ci".into(), token_sha256: digest_bytes(b"s3cret-token"), scopes: Vec::new() },
        ]
    );
    assert!(!format!("{spec:?}").contains("s3cret"));
    assert_eq!(spec.stdio.unwrap().scopes, ["tools"]);
}

#[test]
fn the_summary_shows_trust_policy_and_callers_but_no_hashes() {
    let digest = format!("sha256:{}", "0f".repeat(32));
    let text = format!(
        "{ONE}trust = \"pinned\"\n[[upstream]]\nname = \"web\"\nurl = \"https://web.example/mcp\"\n\
         min_confidence = 0.9\n[[upstream]]\nname = \"fs\"\ncommand = \"fs-server\"\ntrust = \"verified\"\n\
         [upstream.manifest]\npath = \"fs.json\"\npublic_keys = [\"{KEY}\"]\n\
         [[policy.rule]]\neffect = \"deny\"\nmatch.tool = \"*admin*\"\n[policy]\nmode = \"sandbox\"\n\
         [[caller]]\nname = \"alice\"\ntoken_sha256 = \"{digest}\"\nscopes = [\"tools\", \"admin\"]\n\
         [[caller]]\nname = \"ci\"\ntoken_env = \"SEARCH_TOKEN\"\n\
         [listen.http]\n[listen.stdio]\nidentity = \"desktop\"\nscopes = [\"tools\"]\n"
    );
    let summary = summary(&text);
    assert_eq!(
        summary.callers,
        [
            CallerSummary { name: "alice".into(), scopes: vec!["tools".into(), "admin".into()] },
            CallerSummary { name: "ci".into(), scopes: Vec::new() },
        ]
    );
    assert_eq!(
        summary.listeners[1],
        ListenerSummary::Stdio { identity: "desktop".into(), scopes: vec!["tools".into()] }
    );
    let shown = summary.to_string();
    let debug = format!("{summary:?}");
    for secret in [digest.as_str(), "0f0f0f", "s3cret", &digest_bytes(b"s3cret-token")] {
        assert!(!shown.contains(secret) && !debug.contains(secret), "{secret} in {shown}");
    }
    assert_eq!(
        shown,
        format!(
            "gateway.toml: 3 upstreams, 2 listeners\n\
             upstreams:\n  \
               git  stdio  uvx  (trust pinned; tools exposed as git_*)\n  \
               web  http   https://web.example/mcp  (trust untrusted, min confidence 0.9; tools exposed as web_*)\n  \
               fs   stdio  fs-server  (trust verified by fs.json signed by {KEY}; tools exposed as fs_*)\n\
             listeners:\n  \
               http   http://127.0.0.1:8765/mcp  (this machine only)\n  \
               stdio  identity \"desktop\" (scopes: tools)\n\
             limits: messages up to 16 MiB, at most 1024 sessions, idle sessions closed after 30 min\n\
             policy: mode sandbox, default profile standard, 1 rule, session taint on\n\
             callers:\n  \
               alice (scopes: tools, admin)\n  \
               ci (no scopes)\n\
             warning: gateway.toml:12:9: upstream \"fs\": trust = \"verified\": its declared hints are believed for \
             the tools in fs.json when signed by the listed key; check that the keys are the server author's"
        )
    );
}

#[test]
fn warnings_for_public_listeners_clear_arguments_and_idle_settings() {
    let public = format!("{ONE}[listen.http]\nbind = \"0.0.0.0:8765\"\n");
    assert_eq!(
        warnings(&public),
        ["gateway.toml:5:8: [listen.http]: `bind` 0.0.0.0:8765 is reachable from other machines and no `[[caller]]` \
          is configured: anyone who can reach it can call tools"]
    );
    let with_caller = format!("{public}[[caller]]\nname = \"ci\"\ntoken_env = \"SEARCH_TOKEN\"\n");
    assert_eq!(
        warnings(&with_caller),
        ["gateway.toml:5:8: [listen.http]: `bind` 0.0.0.0:8765 is reachable from other machines over plain http: \
          callers' tokens cross the network unencrypted unless TLS is terminated in front"]
    );
    assert_eq!(
        warnings(&format!("{ONE}[audit]\narguments = \"clear\"\n")),
        ["gateway.toml:5:13: [audit]: `arguments = \"clear\"` writes every call's arguments to the audit log as they \
          are, secrets and personal data included; the default \"digest\" stores only their SHA-256"]
    );
    assert_eq!(
        warnings(&format!("{ONE}trust = \"pinned\"\nmin_confidence = 0.9\n")),
        ["gateway.toml:5:18: upstream \"git\": `min_confidence` only applies to trust = \"untrusted\"; this upstream \
          is pinned"]
    );
    assert_eq!(
        warnings(&format!("{ONE}[[caller]]\nname = \"ci\"\ntoken_env = \"SEARCH_TOKEN\"\n[listen.stdio]\n")),
        ["gateway.toml:4:1: [[caller]] tokens authenticate HTTP clients, but there is no `[listen.http]`; stdio \
          clients get `[listen.stdio]` `scopes`"]
    );
    assert_eq!(
        warnings(&format!("{ONE}[[policy.rule]]\neffect = \"deny\"\nmatch = {{ upstream = [\"git\", \"githbu\"] }}\n")),
        ["gateway.toml:6:11: policy rule 1: `match.upstream` pattern `githbu` matches no configured upstream"]
    );
}

#[test]
fn audit_retention_is_lowered_with_the_export_directory_beside_the_config() {
    let spec = parse(&format!("{ONE}[audit]\nkeep_days = 30\nmax_bytes = 1000000\nexport_dir = \"exported\"\n"));
    assert_eq!(
        spec.guardrails.audit,
        AuditSpec {
            arguments_in_clear: false,
            keep_days: Some(30),
            max_bytes: Some(1_000_000),
            export_dir: Some(PathBuf::from("conf/exported")),
        }
    );
}

#[test]
fn the_store_is_sqlite_unless_a_postgres_url_is_given_and_its_password_comes_from_the_environment() {
    let store = |text: &str, env: &dyn Fn(&str) -> Option<String>| {
        crate::parse_store_config(&format!("{ONE}{text}"), std::path::Path::new("gateway.toml"), env).unwrap()
    };
    let none = |_: &str| None;
    assert_eq!(store("", &none), crate::StoreSpec::default());
    let plain = store("[store]\nurl = \"postgres://toolgate@db/toolgate\"\ninstance_id = \"eu-1\"\n", &none);
    let postgres = plain.postgres.as_ref().unwrap();
    assert_eq!(postgres.url, "postgres://toolgate@db/toolgate");
    assert_eq!((postgres.max_connections, postgres.acquire_timeout), (10, std::time::Duration::from_secs(5)));
    assert_eq!(plain.instance_id.as_deref(), Some("eu-1"));
    let secret = |name: &str| (name == "STORE_URL").then(|| "postgres://toolgate:s3cret@db/toolgate".to_owned());
    let from_env = store("[store]\nurl_env = \"STORE_URL\"\nmax_connections = 32\nacquire_timeout_ms = 250\n", &secret);
    let postgres = from_env.postgres.as_ref().unwrap();
    assert_eq!((postgres.url_env.as_deref(), postgres.max_connections), (Some("STORE_URL"), 32));
    assert_eq!(postgres.acquire_timeout, std::time::Duration::from_millis(250));
    assert!(postgres.url.contains("s3cret"), "the environment may hold the password");
    assert!(!format!("{from_env:?}").contains("s3cret"), "never printed: {from_env:?}");
    // A pool of one is what the store accepts (the change listener has a connection of its own).
    let one = store("[store]\nurl = \"postgres://toolgate@db/toolgate\"\nmax_connections = 1\n", &none);
    assert_eq!(one.postgres.as_ref().map(|postgres| postgres.max_connections), Some(1));
}
