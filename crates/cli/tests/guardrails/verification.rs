//! Verification records as evidence under `toolgate serve`: `toolgate verify` stores what liar.py's and
//! mcp-server-time's tools did in the state directory, and the gateway serving the same commands from it tightens
//! every hint the liar was caught contradicting although its upstream is trusted (`pinned`), lets the untrusted time
//! server's closed-world declaration count on the strength of quiet calls (inference alone rejects it), and names
//! the record in `_meta["toolgate/annotations"]`; a SIGHUP keeps them (the reloaded upstreams are weighed with the same
//! records, so none looks changed). `inspect --json`, `lint --format json` and `prompt` through the same config and
//! state directory show the same hints, rules, category and record as the relay's listing (issue 15's one truth),
//! and the time server's record matches although the config names it bare while `verify` ran it by its path.

use serde_json::{Value, json};
use toolgate_test_support::{Peers, liar};

use crate::support::{HttpSession, Setup, poll, run_guarded, start_serve, toolgate};

/// `toolgate verify --format json --state-dir STATE [--allow-writes] -- ARGV` in `dir`, on serve's `PATH`: tool name →
/// record name.
fn verify(
    state: &str,
    dir: &std::path::Path,
    allow_writes: bool,
    argv: &[String],
    expected: i32,
) -> Vec<(String, String)> {
    let dir = dir.to_string_lossy();
    let mut args = vec!["verify", "--format", "json", "--state-dir", state, "--dir", &dir];
    if allow_writes {
        args.push("--allow-writes");
    }
    args.push("--");
    args.extend(argv.iter().map(String::as_str));
    // On serve's `PATH`: a bare program is matched as the spawn finds it, so verify must find the same one.
    let run = toolgate_on_path(&args, &Peers::locate().path_env());
    assert_eq!(run.code, Some(expected), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| Some((tool["name"].as_str()?.to_owned(), tool["record"].as_str()?.to_owned())))
        .collect()
}

fn record_of<'a>(records: &'a [(String, String)], tool: &str) -> &'a str {
    records.iter().find(|(name, _)| name == tool).map(|(_, record)| record.as_str()).unwrap_or_else(|| panic!("{tool}"))
}

fn listed(session: &mut HttpSession) -> Vec<Value> {
    let response = session.request("tools/list", json!({})).expect("tools/list");
    response["result"]["tools"].as_array().cloned().unwrap_or_default()
}

#[test]
fn serve_tightens_what_verify_caught_and_counts_what_it_supported() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "buy milk\n").unwrap();
    let state = dir.path().join("state").to_string_lossy().into_owned();
    let liar_argv = liar().argv();
    let time_argv = peers.mcp_server_time().argv();
    let liar_records = verify(&state, &work, true, &liar_argv, 1);
    let time_records = verify(&state, &work, false, &time_argv, 0);

    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[[upstream]]\nname = \"liar\"\ncommand = {:?}\nargs = [{:?}]\ntrust = \"pinned\"\n\n\
             [[upstream]]\nname = \"time\"\ncommand = \"mcp-server-time\"\n\n[listen.http]\nbind = \"127.0.0.1:0\"\n",
            liar_argv[0], liar_argv[1]
        ),
    )
    .unwrap();
    let setup = Setup { dir, config };
    let serve = start_serve(&setup, &[("PATH", &peers.path_env())]);
    let mut session = HttpSession::open(&serve.authority, &[]).expect("a session");
    // The liar is trusted once its definitions are pinned: from then on its declarations win, except where verify saw
    // otherwise.
    poll("the liar's definitions pinned", || {
        let run = toolgate(&["pins", "approve", "--upstream", "liar", "--all", "--state-dir", &state]);
        (run.code == Some(0) && !run.stdout.contains("not assessed")).then_some(())
    });
    let tools = poll("the liar's tools listed", || {
        let tools = listed(&mut session);
        tools.iter().any(|tool| tool["name"] == "liar_read_status").then_some(tools)
    });
    // Two upstreams: each tool is exposed under its upstream's name.
    let find =
        |name: &str| tools.iter().find(|tool| tool["name"] == name).unwrap_or_else(|| panic!("{name}: {tools:#?}"));
    let check = |name: &str, hint: &str, value: bool, rule: &str, record: &str, trust: &str| {
        let tool = find(name);
        let meta = &tool["_meta"]["toolgate/annotations"];
        assert_eq!(tool["annotations"][hint], value, "{name} {hint}: {tool:#}");
        assert_eq!(meta["rules"][hint], rule, "{name} {hint}: {tool:#}");
        assert_eq!(meta["verification"], record, "{name} names its record: {tool:#}");
        assert_eq!(meta["trust"], trust, "{name}: {tool:#}");
    };
    let contradiction = "observed-contradiction";
    check("liar_read_status", "readOnlyHint", false, contradiction, record_of(&liar_records, "read_status"), "pinned");
    check(
        "liar_lookup_cache",
        "openWorldHint",
        true,
        contradiction,
        record_of(&liar_records, "lookup_cache"),
        "pinned",
    );
    check("liar_set_mode", "idempotentHint", false, contradiction, record_of(&liar_records, "set_mode"), "pinned");
    check("liar_tidy_notes", "destructiveHint", true, contradiction, record_of(&liar_records, "tidy_notes"), "pinned");
    check(
        "liar_read_notes",
        "readOnlyHint",
        true,
        "declared-trusted",
        record_of(&liar_records, "read_notes"),
        "pinned",
    );
    assert_eq!(find("liar_read_status")["_meta"]["toolgate/annotations"]["sources"]["readOnlyHint"], "observed");

    // Untrusted: without a record the closed-world claim is rejected (inference is unsure); quiet calls carry it.
    let confirmed = "declared-relaxing-confirmed-by-observation";
    let record = record_of(&time_records, "get_current_time");
    check("time_get_current_time", "openWorldHint", false, confirmed, record, "untrusted");

    // The views weigh the same records: same hints, rules, record and category as the relay, tool by tool.
    let config = setup.config.to_string_lossy().into_owned();
    for upstream in ["liar", "time"] {
        views_agree(&tools, upstream, &config, &state, &peers.path_env());
    }

    // A SIGHUP reads the records again: an unchanged file changes no upstream, and the evidence stays.
    let status = std::process::Command::new("kill").arg("-HUP").arg(serve.child.id().to_string()).status().unwrap();
    assert!(status.success());
    poll("the reload applied", || serve.stderr_text().contains("policy reloaded").then_some(()));
    let stderr = serve.stderr_text();
    assert!(!stderr.contains("changed (") && !stderr.contains("reload failed"), "nothing changed: {stderr}");
    let after = listed(&mut session);
    let read_status = after.iter().find(|tool| tool["name"] == "liar_read_status").expect("still listed");
    assert_eq!(read_status["_meta"]["toolgate/annotations"]["rules"]["readOnlyHint"], contradiction, "{read_status:#}");
}

/// `toolgate ARGS` with `PATH` set as serve's (the time server is configured by its bare name).
fn toolgate_on_path(args: &[&str], path: &str) -> crate::support::Run {
    let mut command = toolgate_test_support::toolgate::command();
    command.args(args).env("PATH", path);
    run_guarded(command, &format!("toolgate {args:?}"))
}

/// `inspect --json`, `lint --format json` and `prompt` for `upstream` against the relay's `listing`: every one of
/// its tools has the same enforced hints, trust rules and verification record in inspect and lint, and the same
/// category in all three.
fn views_agree(listing: &[Value], upstream: &str, config: &str, state: &str, path: &str) {
    let view = ["--config", config, "--upstream", upstream, "--state-dir", state];
    let inspect = toolgate_on_path(&[&["inspect", "--json"][..], &view[..]].concat(), path);
    assert_eq!(inspect.code, Some(0), "{inspect:?}");
    let lint = toolgate_on_path(&[&["lint", "--format", "json", "--deny", "errors"][..], &view[..]].concat(), path);
    assert!(matches!(lint.code, Some(0 | 1)), "{lint:?}");
    let prompt = toolgate_on_path(&[&["prompt"][..], &view[..]].concat(), path);
    assert_eq!(prompt.code, Some(0), "{prompt:?}");
    let prefix = format!("{upstream}_");
    let relayed: Vec<&Value> =
        listing.iter().filter(|tool| tool["name"].as_str().is_some_and(|name| name.starts_with(&prefix))).collect();
    assert!(!relayed.is_empty(), "{upstream}: {listing:#?}");
    for (what, run) in [("inspect", &inspect), ("lint", &lint)] {
        let report: Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("{what}: {error}: {run:?}"));
        for tool in &relayed {
            let name = &tool["name"].as_str().unwrap()[prefix.len()..];
            let meta = &tool["_meta"]["toolgate/annotations"];
            let shown = report["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|shown| shown["name"] == name)
                .unwrap_or_else(|| panic!("{what} lists no {name}: {report:#}"));
            for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
                assert_eq!(shown["effective"][hint]["value"], tool["annotations"][hint], "{what} {name} {hint}");
                assert_eq!(shown["rules"][hint], meta["rules"][hint], "{what} {name} {hint}: {shown:#}");
            }
            assert_eq!(shown["verification"], meta["verification"], "{what} {name} names the relay's record");
            assert_eq!(shown["category"], meta["category"], "{what} {name}");
        }
    }
    let prompted = crate::one_truth::prompt_categories(&prompt.stdout);
    for tool in &relayed {
        let name = &tool["name"].as_str().unwrap()[prefix.len()..];
        let category = &tool["_meta"]["toolgate/annotations"]["category"];
        assert_eq!(prompted.get(name).map(String::as_str), category.as_str(), "prompt: {name}:\n{}", prompt.stdout);
    }
}
