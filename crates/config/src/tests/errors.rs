//! Every configuration error, with the exact message and position a user sees (data-driven).

use std::path::Path;

use crate::parse_config_with_env;

/// The environment the tests see: no process environment involved.
pub(super) fn test_env(name: &str) -> Option<String> {
    match name {
        "SEARCH_TOKEN" => Some("s3cret-token".to_owned()),
        "EMPTY_TOKEN" => Some("  ".to_owned()),
        "BROKEN_TOKEN" => Some("line\nbreak".to_owned()),
        "CLIENT_ID" => Some("toolgate".to_owned()),
        "CLIENT_SECRET" => Some("cl13nt-s3cret".to_owned()),
        _ => None,
    }
}

#[track_caller]
pub(super) fn check_error(text: &str, expected: &str) {
    match parse_config_with_env(text, Path::new("gateway.toml"), &test_env) {
        Ok(spec) => panic!("expected an error, got {spec:?}"),
        Err(error) => assert_eq!(error.to_string(), expected.trim()),
    }
}

#[test]
fn syntax_errors_have_positions() {
    check_error(
        "[[upstream]]\nname = \"a\ncommand = \"x\"\n",
        "gateway.toml:2:10: invalid TOML: invalid basic string, expected `\"`",
    );
}

#[test]
fn an_unknown_era_is_an_error_at_its_value() {
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nera = \"2026\"\n",
        "gateway.toml:4:7: upstream \"a\": `era` must be \"auto\", \"modern\" or \"legacy\", not \"2026\"",
    );
}

#[test]
fn unknown_keys_are_errors() {
    check_error(
        "[[upstream]]\nname = \"git\"\ncomand = \"uvx\"\n",
        "gateway.toml:3:1: upstream \"git\": unknown key `comand` (expected one of name, command, args, env, cwd, \
         url, headers, bearer_token_env, prefix, passthrough, timeout_seconds, initialize_timeout_seconds, \
         max_in_flight, trust, min_confidence, manifest, open_world_content, tools, sandbox, era, credentials)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.tools.read]\nreadOnly = true\n",
        "gateway.toml:5:1: upstream \"a\": unknown key `readOnly` (expected one of readOnlyHint, destructiveHint, \
         idempotentHint, openWorldHint, title)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[listen.http]\nbnd = \"127.0.0.1:1\"\n",
        "gateway.toml:5:1: [listen.http]: unknown key `bnd` (expected one of bind, path, allowed_origins, allowed_hosts, oauth)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[listen.sse]\n",
        "gateway.toml:4:9: [listen]: unknown key `sse` (expected one of http, stdio)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[limits]\nmax_message_bytes = 1\n",
        "gateway.toml:5:1: [limits]: unknown key `max_message_bytes` (expected one of max_message_mib, max_sessions, \
         session_idle_minutes, max_tools_per_upstream, max_list_items_per_upstream, max_listing_mib_per_upstream, \
         max_sessions_per_caller, max_connections, \
         header_read_timeout_seconds, max_pending_approvals_per_session, max_pending_approvals_per_caller, \
         max_relayed_requests_per_session, max_relayed_requests_per_upstream, held_call_timeout_seconds)",
    );
}

#[test]
fn misplaced_top_level_keys_get_a_hint() {
    const EXPECTED: &str = "upstream, listen, limits, policy, confirmation, pins, results, retries, audit, caller, \
                            selection, console, store";
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[policy]\ndefault = \"deny\"\n",
        "gateway.toml:5:1: [policy]: unknown key `default` (expected one of mode, defaults, session_taint, rule)",
    );
    check_error(
        "trust = \"pinned\"\n[[upstream]]\nname = \"a\"\ncommand = \"x\"\n",
        &format!(
            "gateway.toml:1:1: unknown key `trust` (expected one of {EXPECTED}; `trust` is set per `[[upstream]]`)"
        ),
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[[callers]]\nname = \"ci\"\n",
        &format!(
            "gateway.toml:4:3: unknown key `callers` (expected one of {EXPECTED}; callers are `[[caller]]` tables)"
        ),
    );
    check_error(
        "[upstreams.git]\ncommand = \"x\"\n",
        &format!(
            "gateway.toml:1:2: unknown key `upstreams` (expected one of {EXPECTED}; upstream servers are \
             `[[upstream]]` tables)"
        ),
    );
}

#[test]
fn several_problems_are_reported_at_once() {
    check_error(
        "[[upstream]]\nname = \"a\"\ncomand = \"x\"\n\n[[upstream]]\nname = \"b c\"\nurl = \"ftp://x\"\n\n[limits]\nmax_sessions = 0\n",
        "gateway.toml:3:1: upstream \"a\": unknown key `comand` (expected one of name, command, args, env, cwd, url, \
         headers, bearer_token_env, prefix, passthrough, timeout_seconds, initialize_timeout_seconds, max_in_flight, \
         trust, min_confidence, manifest, open_world_content, tools, sandbox, era, credentials)\n\
         gateway.toml:6:8: upstream name \"b c\" may only contain A-Z, a-z, 0-9, `_` and `-` (try \"b_c\")\n\
         gateway.toml:7:7: upstream \"b c\": url scheme `ftp` is not supported: use http or https\n\
         gateway.toml:10:16: [limits]: `max_sessions` must be between 1 and 100000",
    );
}

#[test]
fn upstream_shape_errors() {
    check_error(
        "",
        "gateway.toml:1:1: no upstream servers: add an `[[upstream]]` table with a `name` and a `command` or `url`",
    );
    check_error(
        "[upstream]\nname = \"a\"\n",
        "gateway.toml:1:1: `upstream` must be an array of tables: write `[[upstream]]` (double brackets)",
    );
    check_error("[[upstream]]\ncommand = \"x\"\n", "gateway.toml:1:1: upstream #1: missing key `name`");
    check_error(
        "[[upstream]]\nname = \"a\"\n",
        "gateway.toml:1:1: upstream \"a\": missing `command` (a stdio server) or `url` (a Streamable HTTP server)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
        "gateway.toml:4:7: upstream \"a\": set either `command` (stdio) or `url` (Streamable HTTP), not both",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nheaders = { X-Key = \"1\" }\n",
        "gateway.toml:4:13: upstream \"a\": `headers` applies only to `url` upstreams, not `command`",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"http://localhost/mcp\"\nargs = []\n",
        "gateway.toml:4:8: upstream \"a\": `args` applies only to `command` upstreams, not `url`",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[[upstream]]\nname = \"a\"\ncommand = \"y\"\n",
        "gateway.toml:5:8: upstream name \"a\" is already used on line 2",
    );
    check_error(
        "[[upstream]]\nname = \"a-very-long-upstream-name-beyond-32\"\ncommand = \"x\"\n",
        "gateway.toml:2:8: upstream name \"a-very-long-upstream-name-beyond-32\" is longer than 32 characters",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\ntimeout_seconds = -5\n",
        "gateway.toml:4:19: upstream \"a\": invalid value: integer `-5`, expected a whole number of at least 0",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\ninitialize_timeout_seconds = 0\n",
        "gateway.toml:4:30: upstream \"a\": timeout must be between 1 and 86400 seconds",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nmax_in_flight = 0\n",
        "gateway.toml:4:17: upstream \"a\": `max_in_flight` must be between 1 and 65536",
    );
}

#[test]
fn commands_are_never_shell_strings() {
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"npx -y @modelcontextprotocol/server-memory\"\n",
        "gateway.toml:3:11: upstream \"a\": `command` \"npx -y @modelcontextprotocol/server-memory\" contains spaces and \
         toolgate runs no shell: write command = \"npx\" and args = [\"-y\", \"@modelcontextprotocol/server-memory\"] \
         (or args = [] if the program's path really contains spaces)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \" \"\nargs = []\n",
        "gateway.toml:3:11: upstream \"a\": `command` is empty",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"~/bin/server\"\n",
        "gateway.toml:3:11: upstream \"a\": `command` starts with `~`, which only a shell expands: write the full path",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nenv = { \"A=B\" = \"1\" }\n",
        "gateway.toml:4:9: upstream \"a\": env name \"A=B\" may not be empty or contain `=`",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nenv = { A = 1 }\n",
        "gateway.toml:4:13: upstream \"a\": invalid type: integer `1`, expected a string",
    );
}

#[test]
fn http_upstream_errors() {
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"localhost:8080/mcp\"\n",
        "gateway.toml:3:7: upstream \"a\": url \"localhost:8080/mcp\" must start with http:// or https://",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://user:pw@host/mcp\"\n",
        "gateway.toml:3:7: upstream \"a\": url contains credentials (`user:password@`): use `headers` or `bearer_token_env`",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nheaders = { \"Mcp-Session-Id\" = \"1\", \"Bad Name\" = \"2\" }\n",
        "gateway.toml:4:13: upstream \"a\": header `Mcp-Session-Id` is set by toolgate itself and cannot be configured\n\
         gateway.toml:4:37: upstream \"a\": header name \"Bad Name\" is not a valid HTTP header name",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"MISSING_TOKEN\"\n",
        "gateway.toml:4:20: upstream \"a\": environment variable `MISSING_TOKEN` (bearer_token_env) is not set",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"EMPTY_TOKEN\"\n",
        "gateway.toml:4:20: upstream \"a\": environment variable `EMPTY_TOKEN` (bearer_token_env) is empty",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"BROKEN_TOKEN\"\n",
        "gateway.toml:4:20: upstream \"a\": environment variable `BROKEN_TOKEN` (bearer_token_env) has characters not \
         allowed in an HTTP header",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"$SEARCH_TOKEN\"\n",
        "gateway.toml:4:20: upstream \"a\": `bearer_token_env`: \"$SEARCH_TOKEN\" is not an environment variable name \
         (letters, digits and `_`)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\nurl = \"https://h/mcp\"\nbearer_token_env = \"SEARCH_TOKEN\"\nheaders = { Authorization = \"Bearer x\" }\n",
        "gateway.toml:4:20: upstream \"a\": set `bearer_token_env` or an `Authorization` header, not both",
    );
}

#[test]
fn prefix_and_override_errors() {
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nprefix = \"my.tools\"\n",
        "gateway.toml:4:10: upstream \"a\": prefix \"my.tools\" may only contain A-Z, a-z, 0-9, `_` and `-` (try \"my_tools\")",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nprefix = \"_\"\n",
        "gateway.toml:4:10: upstream \"a\": `prefix` \"_\" is empty: write prefix = false for no prefix",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nprefix = 3\n",
        "gateway.toml:4:10: upstream \"a\": invalid type: integer `3`, expected true, false or a prefix string",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\nprefix = \"b\"\n[[upstream]]\nname = \"b\"\ncommand = \"y\"\n",
        "gateway.toml:6:8: prefix \"b\" is already used by upstream \"a\"; their tool names would collide",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.tools.read]\n",
        "gateway.toml:4:17: upstream \"a\": tool \"read\" overrides nothing (set readOnlyHint, destructiveHint, \
         idempotentHint, openWorldHint or title)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\ntools.read = { readOnlyHint = \"yes\" }\n",
        "gateway.toml:4:31: upstream \"a\": invalid type: string \"yes\", expected a boolean",
    );
}

#[test]
fn passthrough_serves_one_upstream_without_a_prefix() {
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\npassthrough = true\n[[upstream]]\nname = \"b\"\ncommand = \"y\"\n",
        "gateway.toml:4:15: upstream \"a\": `passthrough = true` serves a single upstream as it is, but this file \
         configures 2 upstreams (remove the others, or the `passthrough` key)",
    );
    check_error(
        "[[upstream]]\nname = \"a\"\ncommand = \"x\"\npassthrough = true\nprefix = \"a\"\n",
        "gateway.toml:5:10: upstream \"a\": `prefix` cannot be set with `passthrough = true` (a passed-through \
         upstream's names are exposed as it gives them)",
    );
}

#[test]
fn listener_and_limit_errors() {
    let one = "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n";
    check_error(
        &format!("{one}[listen]\n"),
        "gateway.toml:4:1: [listen] has no listener: add `[listen.http]` or `[listen.stdio]` (or remove [listen] for \
         HTTP on 127.0.0.1:8765)",
    );
    check_error(
        &format!("{one}[listen.http]\nbind = \"8765\"\n"),
        "gateway.toml:5:8: [listen.http]: `bind` \"8765\" is not an address with a port, like 127.0.0.1:8765 or [::1]:8765",
    );
    check_error(
        &format!("{one}[listen.http]\npath = \"mcp\"\n"),
        "gateway.toml:5:8: [listen.http]: `path` \"mcp\" must start with `/`",
    );
    check_error(
        &format!("{one}[listen.http]\nallowed_origins = [\"*\", \"https://app.example.com/\"]\n"),
        "gateway.toml:5:20: [listen.http]: `*` would accept every web page: list the origins explicitly\n\
         gateway.toml:5:25: [listen.http]: origin \"https://app.example.com/\" has a path; an origin is only scheme, \
         host and port (\"https://app.example.com\")",
    );
    check_error(
        &format!("{one}[listen.http]\nallowed_hosts = [\"http://example.com\"]\n"),
        "gateway.toml:5:18: [listen.http]: host \"http://example.com\" must be a host name with an optional port, like \
         example.com:8765",
    );
    check_error(
        &format!("{one}[listen.stdio]\nidentity = \"two words\"\n"),
        "gateway.toml:5:12: [listen.stdio]: `identity` must be 1 to 64 visible ASCII characters without spaces",
    );
    check_error(
        &format!("{one}[limits]\nmax_message_mib = 4096\n"),
        "gateway.toml:5:19: [limits]: `max_message_mib` must be between 1 and 1024",
    );
}

#[test]
fn sandbox_settings_are_checked_with_their_positions() {
    let upstream = "[[upstream]]\nname = \"fs\"\ncommand = \"x\"\n";
    check_error(
        &format!("{upstream}[upstream.sandbox]\nmode = \"tight\"\n"),
        "gateway.toml:5:8: upstream \"fs\": unknown value `tight` (expected one of off, auto, strict)",
    );
    check_error(
        &format!("{upstream}[upstream.sandbox]\nwritable = [\"/data\"]\n"),
        "gateway.toml:4:1: upstream \"fs\": `[upstream.sandbox]` needs `mode` (\"off\", \"auto\" or \"strict\")",
    );
    check_error(
        &format!("{upstream}[upstream.sandbox]\nmode = \"auto\"\nwritable = [\"~/data\"]\n"),
        "gateway.toml:6:13: upstream \"fs\": `sandbox.writable` path starts with `~`, which only a shell expands",
    );
    check_error(
        &format!("{upstream}[upstream.sandbox]\nmode = \"strict\"\nmax_processes = 20\n"),
        "gateway.toml:6:17: upstream \"fs\": `sandbox.max_processes` must be between 300 and 4194300",
    );
    check_error(
        &format!("{upstream}[upstream.sandbox]\nmode = \"strict\"\npass_env = [\"PATH\", \"BAD-NAME\"]\n"),
        "gateway.toml:6:21: upstream \"fs\": `sandbox.pass_env`: \"BAD-NAME\" is not an environment variable name \
         (letters, digits and `_`)",
    );
    check_error(
        &format!("{upstream}[upstream.sandbox]\nmode = \"auto\"\nnetwork = \"yes\"\n"),
        "gateway.toml:6:11: upstream \"fs\": invalid type: string \"yes\", expected a boolean",
    );
    check_error(
        "[[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:1/mcp\"\nsandbox = { mode = \"auto\" }\n",
        "gateway.toml:4:11: upstream \"web\": `[upstream.sandbox]` applies only to `command` upstreams",
    );
}
