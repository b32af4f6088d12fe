//! The documented defaults and lowering rules: prefixes, listeners, limits, timeouts, paths, credentials, summary.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toolgate_core::HintOverrides;
use toolgate_spec::Endpoint;
use toolgate_spec::{GatewaySpec, Limits, Prefix};

use super::errors::test_env;
use crate::{ListenerSummary, Transport, check_config_text, parse_config_with_env};

fn parse(text: &str) -> GatewaySpec {
    parse_config_with_env(text, Path::new("conf/gateway.toml"), &test_env).unwrap()
}

fn prefixes(text: &str) -> Vec<Prefix> {
    parse(text).upstreams.into_iter().map(|upstream| upstream.prefix).collect()
}

const ONE: &str = "[[upstream]]\nname = \"git\"\ncommand = \"uvx\"\nargs = [\"mcp-server-git\"]\n";
const TWO: &str = "[[upstream]]\nname = \"git\"\ncommand = \"uvx\"\n[[upstream]]\nname = \"search\"\nurl = \"https://s.example/mcp\"\n";

#[test]
fn prefix_is_off_for_a_single_upstream_and_on_for_several() {
    assert_eq!(prefixes(ONE), [Prefix::None]);
    assert_eq!(prefixes(TWO), [Prefix::With("git".into()), Prefix::With("search".into())]);
    assert_eq!(prefixes(&format!("{ONE}passthrough = true\n")), [Prefix::Passthrough]);
    assert_eq!(prefixes(&format!("{ONE}passthrough = false\n")), [Prefix::None]);
}

#[test]
fn prefix_can_be_forced_renamed_or_disabled() {
    assert_eq!(prefixes(&format!("{ONE}prefix = true\n")), [Prefix::With("git".into())]);
    assert_eq!(prefixes(&format!("{ONE}prefix = \"vcs_\"\n")), [Prefix::With("vcs".into())]);
    let text = TWO.replace("command = \"uvx\"\n", "command = \"uvx\"\nprefix = false\n");
    assert_eq!(prefixes(&text), [Prefix::None, Prefix::With("search".into())]);
}

#[test]
fn bearer_token_env_becomes_an_authorization_header() {
    let spec = parse(
        "[[upstream]]\nname = \"s\"\nurl = \"https://s.example/mcp\"\nbearer_token_env = \"SEARCH_TOKEN\"\n\
         headers = { X-Team = \"tools\" }\n",
    );
    let Endpoint::Http { url, headers } = &spec.upstreams[0].endpoint else { panic!("not http") };
    assert_eq!(url, "https://s.example/mcp");
    assert_eq!(
        headers,
        &[("X-Team".to_owned(), "tools".to_owned()), ("Authorization".to_owned(), "Bearer s3cret-token".to_owned())]
    );
}

#[test]
fn the_token_never_appears_in_the_summary() {
    let text = "[[upstream]]\nname = \"s\"\nurl = \"http://s.example/mcp\"\nbearer_token_env = \"SEARCH_TOKEN\"\n";
    let summary = check_config_text(text, Path::new("gateway.toml"), &test_env).unwrap();
    let shown = summary.to_string();
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(!format!("{summary:?}").contains("s3cret"));
    assert!(shown.contains("bearer token from $SEARCH_TOKEN"), "{shown}");
    assert_eq!(summary.upstreams[0].header_names, Vec::<String>::new());
    assert_eq!(
        summary.warnings[0].to_string(),
        "gateway.toml:3:7: upstream \"s\": credentials are sent to s.example over plain http; use https"
    );
}

#[test]
fn without_listen_http_serves_on_loopback() {
    let spec = parse(ONE);
    let http = spec.http.unwrap();
    assert_eq!(http.bind.to_string(), "127.0.0.1:8765");
    assert_eq!(http.path, "/mcp");
    assert!(spec.stdio.is_none());
    assert_eq!(spec.limits, Limits::default());
    assert_eq!(spec.source, Some(PathBuf::from("conf/gateway.toml")));
}

#[test]
fn listeners_and_limits_are_lowered() {
    let spec = parse(&format!(
        "{ONE}[listen.stdio]\n[listen.http]\nbind = \"localhost:9000\"\npath = \"/gw\"\n\
         allowed_origins = [\"https://app.example.com\"]\nallowed_hosts = [\"gw.internal:9000\"]\n\
         [limits]\nmax_message_mib = 4\nmax_sessions = 8\nsession_idle_minutes = 5\nmax_tools_per_upstream = 50\n\
         max_list_items_per_upstream = 70\nmax_listing_mib_per_upstream = 2\nheld_call_timeout_seconds = 7\n"
    ));
    let http = spec.http.unwrap();
    assert_eq!(http.bind.to_string(), "127.0.0.1:9000");
    assert_eq!(http.path, "/gw");
    assert_eq!(http.allowed_origins, ["https://app.example.com"]);
    assert_eq!(http.allowed_hosts, ["gw.internal:9000"]);
    assert_eq!(spec.stdio.unwrap().identity, "stdio");
    assert_eq!(
        spec.limits,
        Limits {
            max_message_bytes: 4 * 1024 * 1024,
            max_sessions: 8,
            session_idle_timeout: Duration::from_secs(300),
            max_tools_per_upstream: 50,
            max_list_items_per_upstream: 70,
            max_listing_bytes_per_upstream: 2 * 1024 * 1024,
            max_sessions_per_caller: 8,
            held_call_timeout: Duration::from_secs(7),
            ..Limits::default()
        }
    );
}

#[test]
fn only_stdio_when_only_stdio_is_listed() {
    let spec = parse(&format!("{ONE}[listen.stdio]\nidentity = \"claude-desktop\"\n"));
    assert!(spec.http.is_none());
    assert_eq!(spec.stdio.unwrap().identity, "claude-desktop");
}

#[test]
fn a_public_bind_is_allowed_with_a_warning() {
    let text = format!("{ONE}[listen.http]\nbind = \"0.0.0.0:8765\"\n");
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert_eq!(
        summary.listeners,
        [ListenerSummary::Http { bind: "0.0.0.0:8765".parse().unwrap(), path: "/mcp".into(), loopback: false }]
    );
    assert!(summary.warnings[0].message.contains("reachable from other machines"), "{:?}", summary.warnings);
}

#[test]
fn stdio_endpoint_keeps_what_the_file_says_with_paths_anchored_at_the_file() {
    let spec = parse(
        "[[upstream]]\nname = \"local\"\ncommand = \"./bin/server\"\nargs = [\"--flag\", \"two words\"]\n\
         cwd = \"data\"\nenv = { B = \"2\", A = \"1\" }\n[[upstream]]\nname = \"abs\"\ncommand = \"/usr/bin/srv\"\n\
         [[upstream]]\nname = \"path\"\ncommand = \"npx\"\n",
    );
    assert_eq!(
        spec.upstreams[0].endpoint,
        Endpoint::Stdio {
            program: "conf/bin/server".into(),
            args: vec!["--flag".into(), "two words".into()],
            env: vec![("A".into(), "1".into()), ("B".into(), "2".into())],
            cwd: Some(PathBuf::from("conf/data")),
        }
    );
    assert_eq!(spec.upstreams[1].endpoint, Endpoint::stdio("/usr/bin/srv", Vec::<String>::new()));
    assert_eq!(spec.upstreams[2].endpoint, Endpoint::stdio("npx", Vec::<String>::new()));
}

#[test]
fn a_program_path_with_spaces_needs_explicit_args() {
    let spec = parse("[[upstream]]\nname = \"a\"\ncommand = \"/opt/My Server/run\"\nargs = []\n");
    assert_eq!(spec.upstreams[0].endpoint, Endpoint::stdio("/opt/My Server/run", Vec::<String>::new()));
}

#[test]
fn timeouts_default_to_the_connection_defaults() {
    let spec = parse(&format!("{TWO}timeout_seconds = 5\ninitialize_timeout_seconds = 7\n"));
    assert_eq!(spec.upstreams[0].request_timeout, Duration::from_secs(60));
    assert_eq!(spec.upstreams[0].initialize_timeout, Duration::from_secs(30));
    assert_eq!(spec.upstreams[1].request_timeout, Duration::from_secs(5));
    assert_eq!(spec.upstreams[1].initialize_timeout, Duration::from_secs(7));
}

#[test]
fn max_in_flight_defaults_to_the_connection_default() {
    let spec = parse(&format!("{TWO}max_in_flight = 8\n"));
    assert_eq!(spec.upstreams[0].max_in_flight, toolgate_spec::DEFAULT_MAX_IN_FLIGHT);
    assert_eq!(spec.upstreams[1].max_in_flight, 8);
}

#[test]
fn era_defaults_to_legacy_and_takes_each_setting() {
    let spec = parse(&format!("{TWO}era = \"auto\"\n"));
    assert_eq!(spec.upstreams[0].era, toolgate_spec::UpstreamEra::Legacy);
    assert_eq!(spec.upstreams[1].era, toolgate_spec::UpstreamEra::Auto);
    let spec = parse(&format!("{TWO}era = \"modern\"\n"));
    assert_eq!(spec.upstreams[1].era, toolgate_spec::UpstreamEra::Modern);
    let spec = parse(&format!("{TWO}era = \"legacy\"\n"));
    assert_eq!(spec.upstreams[1].era, toolgate_spec::UpstreamEra::Legacy);
}

#[test]
fn open_world_content_is_judged_from_the_tools_unless_the_file_says() {
    let spec = parse(&format!("{TWO}open_world_content = false\n"));
    assert_eq!(spec.upstreams[0].trust.open_world_content, None);
    assert_eq!(spec.upstreams[1].trust.open_world_content, Some(false));
}

#[test]
fn tool_overrides_are_lowered_field_by_field() {
    let spec = parse(&format!(
        "{ONE}[upstream.tools.git_status]\nreadOnlyHint = true\n[upstream.tools.\"git.reset\"]\n\
         destructiveHint = true\nidempotentHint = false\nopenWorldHint = false\ntitle = \"Reset\"\n"
    ));
    let overrides = &spec.upstreams[0].overrides;
    assert_eq!(overrides["git_status"], HintOverrides { read_only: Some(true), ..HintOverrides::default() });
    assert_eq!(
        overrides["git.reset"],
        HintOverrides {
            title: Some("Reset".into()),
            read_only: None,
            destructive: Some(true),
            idempotent: Some(false),
            open_world: Some(false),
        }
    );
}

#[test]
fn several_unprefixed_upstreams_are_warned_about() {
    let text = TWO.replace("command = \"uvx\"\n", "command = \"uvx\"\nprefix = false\n") + "prefix = false\n";
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert_eq!(
        summary.warnings[0].to_string(),
        "gateway.toml:8:10: upstreams \"git\", \"search\" expose unprefixed tool names; when two offer the same \
         name, the first in file order wins"
    );
}

#[test]
fn summary_reads_well() {
    let text = format!(
        "{TWO}bearer_token_env = \"SEARCH_TOKEN\"\n[upstream.tools.find]\nreadOnlyHint = true\n[listen.stdio]\n[listen.http]\n"
    );
    let summary = check_config_text(&text, Path::new("gateway.toml"), &test_env).unwrap();
    assert_eq!(summary.upstreams[1].transport, Transport::Http);
    assert_eq!(summary.upstreams[1].exposed_prefix.as_deref(), Some("search_"));
    assert_eq!(
        summary.to_string(),
        "gateway.toml: 2 upstreams, 2 listeners\n\
         upstreams:\n  \
           git     stdio  uvx  (trust untrusted; tools exposed as git_*)\n  \
           search  http   https://s.example/mcp  (trust untrusted; tools exposed as search_*; 1 override; credentials static, bearer token from $SEARCH_TOKEN)\n\
         listeners:\n  \
           http   http://127.0.0.1:8765/mcp  (this machine only)\n  \
           stdio  identity \"stdio\" (no scopes)\n\
         limits: messages up to 16 MiB, at most 1024 sessions, idle sessions closed after 30 min\n\
         policy: mode normal, default profile standard, 0 rules, session taint on\n\
         callers: none"
    );
}

#[test]
fn sandbox_is_off_without_a_table_and_lowered_with_one() {
    use toolgate_spec::{SandboxMode, SandboxSpec};
    let plain = parse("[[upstream]]\nname = \"a\"\ncommand = \"x\"\n");
    assert_eq!(plain.upstreams[0].sandbox, SandboxSpec::default());
    assert_eq!(plain.sandbox.hidden_paths, vec![PathBuf::from("conf/gateway.toml")]);
    let spec = parse(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.sandbox]\nmode = \"strict\"\nwritable = \
         [\"data\", \"/srv/x\"]\nnetwork = true\npass_env = [\"PATH\"]\nmemory_mib = 512\nmax_open_files = 256\n\
         clean_cwd = true\n[listen.http]\nbind = \"127.0.0.1:9100\"\n",
    );
    let sandbox = &spec.upstreams[0].sandbox;
    assert_eq!(sandbox.mode, SandboxMode::Strict);
    assert_eq!(sandbox.writable, vec![PathBuf::from("conf/data"), "/srv/x".into()]);
    assert_eq!((sandbox.network, sandbox.pass_env.clone()), (Some(true), vec!["PATH".to_owned()]));
    assert_eq!((sandbox.memory_mib, sandbox.max_open_files, sandbox.clean_cwd), (512, 256, true));
    assert_eq!(spec.sandbox.own_ports, vec![9100]);
}
