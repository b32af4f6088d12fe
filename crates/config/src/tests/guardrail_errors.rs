//! Every guardrail configuration error (trust, policy, confirmation, results, retries, audit, callers, selection,
//! scopes), with the exact message and position a user sees.

use super::errors::check_error;

const ONE: &str = "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n";
const KEY: &str = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

#[test]
fn trust_errors() {
    check_error(
        &format!("{ONE}trust = \"high\"\n"),
        "gateway.toml:4:9: upstream \"a\": unknown value `high` (expected one of untrusted, pinned, verified)",
    );
    check_error(
        &format!("{ONE}min_confidence = 0.3\n"),
        "gateway.toml:4:18: upstream \"a\": `min_confidence` must be between 0.5 and 1.0",
    );
    check_error(
        &format!("{ONE}min_confidence = nan\n"),
        "gateway.toml:4:18: upstream \"a\": `min_confidence` must be between 0.5 and 1.0",
    );
    check_error(
        &format!("{ONE}trust = \"verified\"\n"),
        "gateway.toml:4:9: upstream \"a\": trust = \"verified\" needs an `[upstream.manifest]` table with `path` and \
         `public_keys`",
    );
    check_error(
        &format!("{ONE}trust = \"pinned\"\n[upstream.manifest]\npath = \"m.json\"\npublic_keys = [\"{KEY}\"]\n"),
        "gateway.toml:5:1: upstream \"a\": `[upstream.manifest]` needs trust = \"verified\" (this upstream is pinned)",
    );
    check_error(
        &format!("{ONE}manifest = {{ path = \"m.json\", public_keys = [\"{KEY}\"] }}\n"),
        "gateway.toml:4:12: upstream \"a\": `[upstream.manifest]` needs trust = \"verified\" (this upstream is \
         untrusted)",
    );
    check_error(
        &format!("{ONE}trust = \"verified\"\n[upstream.manifest]\npath = \"m.json\"\n"),
        "gateway.toml:5:1: upstream \"a\": missing key `public_keys`",
    );
    check_error(
        &format!("{ONE}trust = \"verified\"\n[upstream.manifest]\npath = \"\"\npublic_keys = []\n"),
        "gateway.toml:6:8: upstream \"a\": manifest `path` is empty\n\
         gateway.toml:7:15: upstream \"a\": manifest `public_keys` is empty: list the Ed25519 keys that may sign it",
    );
    check_error(
        &format!(
            "{ONE}trust = \"verified\"\n[upstream.manifest]\npath = \"m.json\"\npublic_keys = [\"{KEY}\", \"AAAA\", \"{KEY}\"]\n"
        ),
        "gateway.toml:7:64: upstream \"a\": public key \"AAAA\" is not an Ed25519 public key (standard base64 of 32 \
         bytes, 44 characters ending in `=`)\n\
         gateway.toml:7:72: upstream \"a\": public key \"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\" is listed twice",
    );
    check_error(
        &format!("{ONE}trust = \"verified\"\n[upstream.manifest]\npath = \"m.json\"\nkeys = []\n"),
        "gateway.toml:7:1: upstream \"a\": unknown key `keys` (expected path or public_keys)",
    );
}

#[test]
fn policy_shape_errors() {
    check_error(
        &format!("policy = 1\n{ONE}"),
        "gateway.toml:1:10: `policy` must be a table (`[policy]`, `[[policy.rule]]`)",
    );
    check_error(
        &format!("{ONE}[policy]\nmode = \"strict\"\n"),
        "gateway.toml:5:8: [policy]: unknown value `strict` (expected one of normal, sandbox, read-only)",
    );
    check_error(
        &format!("{ONE}[policy.rule]\neffect = \"deny\"\n"),
        "gateway.toml:4:1: `policy.rule` must be an array of tables: write `[[policy.rule]]` (double brackets)",
    );
    check_error(
        &format!(
            "{ONE}[[policy.rule]]\neffect = \"permit\"\n[[policy.rule]]\nid = \"r\"\neffect = \"deny\"\nmatch = {{ destructve = true }}\n"
        ),
        "gateway.toml:5:10: policy rule 1: unknown value `permit` (expected one of allow, confirm, deny, hide)\n\
         gateway.toml:9:11: policy rule 2 (`r`): unknown key `destructve` (expected one of upstream, tool, read_only, \
         destructive, idempotent, open_world, category, min_risk, max_risk, read_only_rule, destructive_rule, \
         idempotent_rule, open_world_rule, any_hint_rule, scopes, missing_scopes, mode, session_tainted)",
    );
    check_error(
        &format!("{ONE}[[policy.rule]]\nmatch = {{ tool = \"x\" }}\n"),
        "gateway.toml:4:1: policy rule 1: missing key `effect`",
    );
}

#[test]
fn policy_compile_errors_point_at_the_key() {
    check_error(
        &format!(
            "{ONE}[[policy.rule]]\nid = \"r\"\neffect = \"deny\"\nmatch = {{ tool = \"delete_[a-z]\" }}\n\
             [[policy.rule]]\neffect = \"allow\"\nmatch.category = \"reads\"\n[[policy.rule]]\neffect = \"hide\"\n\
             match = {{ min_risk = 3, max_risk = 1 }}\n"
        ),
        "gateway.toml:7:11: policy rule 1 (`r`): `match.tool` has a bad pattern `delete_[a-z]`: `[` is reserved in \
         patterns (only `*`, `?` and literal characters are supported)\n\
         gateway.toml:10:7: policy rule 2: `match.category`: unknown category `reads` (expected one of: read, write, \
         external, destructive)\n\
         gateway.toml:13:11: policy rule 3: `match.min_risk` (3) is above `match.max_risk` (1), so the rule matches \
         nothing",
    );
    check_error(
        &format!("{ONE}[[policy.rule]]\neffect = \"deny\"\nmatch = {{ max_risk = 7 }}\n"),
        "gateway.toml:6:11: policy rule 1: `match.max_risk` is 7, but risk levels go from 0 to 4",
    );
    check_error(
        &format!("{ONE}[[policy.rule]]\neffect = \"deny\"\nmatch = {{ scopes = [] }}\n"),
        "gateway.toml:6:11: policy rule 1: `match.scopes` is an empty list, which matches nothing (leave the key out \
         to match anything)",
    );
    check_error(
        &format!("{ONE}[[policy.rule]]\nid = \"\"\neffect = \"deny\"\n"),
        "gateway.toml:5:1: policy rule 1 (``): `id` contains an empty string",
    );
    check_error(
        &format!(
            "{ONE}[[policy.rule]]\nid = \"x\"\neffect = \"deny\"\n[[policy.rule]]\neffect = \"allow\"\nid = \"x\"\n"
        ),
        "gateway.toml:9:1: policy rule 2 (`x`): the id is used by an earlier rule",
    );
}

#[test]
fn guardrail_section_errors() {
    check_error(
        &format!("{ONE}[confirmation]\nvia = \"email\"\ntimeout_seconds = 0\napproval_ttl_seconds = 100000\n"),
        "gateway.toml:5:7: [confirmation]: unknown value `email` (expected elicitation or queue)",
    );
    check_error(
        &format!("{ONE}[confirmation]\ntimeout_seconds = 0\napproval_ttl_seconds = 100000\nremember = true\n"),
        "gateway.toml:7:1: [confirmation]: unknown key `remember` (expected one of via, timeout_seconds, \
         approval_ttl_seconds, remember_for_session, modern, console_url)",
    );
    // URL-mode confirmations need the console's address as a browser reaches it, never a guess.
    check_error(
        &format!("{ONE}[confirmation]\nmodern = \"console\"\n"),
        "gateway.toml:5:10: [confirmation]: `modern = \"console\"` needs `console_url`, the console's address as a \
         person's browser reaches it (e.g. \"https://toolgate.example.com/console\"); the listen address is not always \
         what a browser sees",
    );
    check_error(
        &format!("{ONE}[confirmation]\nmodern = \"link\"\n"),
        "gateway.toml:5:10: [confirmation]: unknown value `link` (expected one of auto, form, console)",
    );
    check_error(
        &format!("{ONE}[confirmation]\nconsole_url = \"http://gate.example.com/console\"\n"),
        "gateway.toml:5:15: [confirmation]: `console_url` must be an https:// URL (http:// only on loopback: a \
         person's console session would travel in the clear)",
    );
    check_error(
        &format!("{ONE}[confirmation]\nconsole_url = \"https://gate.example.com/console?x=1\"\n"),
        "gateway.toml:5:15: [confirmation]: `console_url` must not have a query or a fragment (pages are found under \
         it)",
    );
    check_error(
        &format!("{ONE}[confirmation]\ntimeout_seconds = 0\napproval_ttl_seconds = 100000\n"),
        "gateway.toml:5:19: [confirmation]: `timeout_seconds` must be between 1 and 86400\n\
         gateway.toml:6:24: [confirmation]: `approval_ttl_seconds` must be between 1 and 86400",
    );
    check_error(
        &format!("{ONE}[pins]\nquarantine = \"delete\"\n"),
        "gateway.toml:5:14: [pins]: unknown value `delete` (expected hide or confirm)",
    );
    check_error(
        &format!("{ONE}[results]\nmax_text_chars = 0\n"),
        "gateway.toml:5:18: [results]: `max_text_chars` must be between 100 and 10000000",
    );
    check_error(
        &format!("{ONE}[results]\nmax_text_chars = 99999999999\n"),
        "gateway.toml:5:18: [results]: `max_text_chars` must be between 100 and 10000000",
    );
    check_error(
        &format!("{ONE}[retries]\nmax_attempts = 11\ninitial_backoff_ms = 0\n"),
        "gateway.toml:5:16: [retries]: `max_attempts` must be between 1 and 10\n\
         gateway.toml:6:22: [retries]: `initial_backoff_ms` must be between 1 and 10000",
    );
    check_error(
        &format!("{ONE}[audit]\narguments = \"none\"\n"),
        "gateway.toml:5:13: [audit]: unknown value `none` (expected digest or clear)",
    );
    check_error(
        &format!("{ONE}[audit]\nkeep_days = 0\nmax_bytes = 10\n"),
        "gateway.toml:5:13: [audit]: `keep_days` must be between 1 and 36500\n\
         gateway.toml:6:13: [audit]: `max_bytes` must be between 65536 and 18446744073709551615",
    );
    check_error(
        &format!("{ONE}[selection]\nmax_tools = 0\nalways_include = [\"git_*\", \"{{a,b}}\"]\n"),
        "gateway.toml:5:13: [selection]: `max_tools` must be between 1 and 10000\n\
         gateway.toml:6:28: [selection]: `always_include` has a bad pattern `{a,b}`: `{` is reserved in patterns \
         (only `*`, `?` and literal characters are supported)",
    );
}

#[test]
fn caller_errors() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    check_error(
        &format!("{ONE}[caller]\nname = \"ci\"\n"),
        "gateway.toml:4:1: `caller` must be an array of tables: write `[[caller]]` (double brackets)",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"ci\"\n"),
        "gateway.toml:4:1: caller \"ci\": missing `token_sha256` (the token's SHA-256, preferred) or `token_env` (a \
         variable holding the token)",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"ci\"\ntoken_sha256 = \"{digest}\"\ntoken_env = \"SEARCH_TOKEN\"\n"),
        "gateway.toml:7:13: caller \"ci\": set either `token_sha256` or `token_env`, not both",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"ci\"\ntoken_sha256 = \"{}\"\n", "AB".repeat(32)),
        "gateway.toml:6:16: caller \"ci\": `token_sha256` must be \"sha256:\" followed by 64 lowercase hex digits (the \
         output of `printf %s \"$TOKEN\" | sha256sum`)",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"ci\"\ntoken_env = \"CI_TOKEN\"\n"),
        "gateway.toml:6:13: caller \"ci\": environment variable `CI_TOKEN` (token_env) is not set",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"ci\"\ntoken_env = \"EMPTY_TOKEN\"\n"),
        "gateway.toml:6:13: caller \"ci\": environment variable `EMPTY_TOKEN` (token_env) is empty",
    );
    check_error(
        &format!(
            "{ONE}[[caller]]\nname = \"ci\"\ntoken_sha256 = \"{digest}\"\n[[caller]]\nname = \"ci\"\n\
             token_sha256 = \"{digest}\"\nscopes = [\"tools\", \"\", \"tools\"]\n"
        ),
        "gateway.toml:8:8: caller name \"ci\" is already used on line 5\n\
         gateway.toml:9:16: caller \"ci\": has the same token as caller \"ci\"; tokens identify callers\n\
         gateway.toml:10:20: caller \"ci\": scope \"\" must be 1 to 64 visible ASCII characters without spaces\n\
         gateway.toml:10:24: caller \"ci\": scope \"tools\" is listed twice",
    );
    check_error(
        &format!("{ONE}[[caller]]\nname = \"a b\"\ntoken_sha256 = \"{digest}\"\nscope = \"x\"\n"),
        "gateway.toml:7:1: caller \"a b\": unknown key `scope` (expected one of name, token_sha256, token_env, scopes)",
    );
    check_error(
        &format!("{ONE}[listen.stdio]\nscopes = [\"two words\"]\n"),
        "gateway.toml:5:11: [listen.stdio]: scope \"two words\" must be 1 to 64 visible ASCII characters without spaces",
    );
}

#[test]
fn console_user_errors() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let other = format!("sha256:{}", "cd".repeat(32));
    check_error(
        &format!("{ONE}[[console.user]]\nname = \"alice\"\n"),
        "gateway.toml:4:1: console user \"alice\": missing `token_sha256` (the token's SHA-256, preferred) or \
         `token_env` (a variable holding the token)",
    );
    check_error(
        &format!("{ONE}[[console.user]]\nname = \"alice\"\ntoken_sha256 = \"{}\"\n", "ab".repeat(32)),
        "gateway.toml:6:16: console user \"alice\": `token_sha256` must be \"sha256:\" followed by 64 lowercase hex \
         digits (the output of `printf %s \"$TOKEN\" | sha256sum`)",
    );
    check_error(
        &format!(
            "{ONE}[[console.user]]\nname = \"alice\"\ntoken_sha256 = \"{digest}\"\n[[console.user]]\nname = \"alice\"\n\
             token_sha256 = \"{other}\"\n[[console.user]]\nname = \"bob\"\ntoken_sha256 = \"{digest}\"\n"
        ),
        "gateway.toml:8:8: console user name \"alice\" is already used on line 5\n\
         gateway.toml:12:16: console user \"bob\": has the same token as console user \"alice\"",
    );
    check_error(
        &format!(
            "{ONE}[[caller]]\nname = \"ci\"\ntoken_sha256 = \"{digest}\"\n[[console.user]]\nname = \"alice\"\n\
             token_sha256 = \"{digest}\"\n"
        ),
        "gateway.toml:9:16: console user \"alice\": has the same token as caller \"ci\"; give the console a token of \
         its own (a token that calls tools must not also approve them)",
    );
    check_error(
        &format!("{ONE}[[console.user]]\nname = \"two words\"\ntoken_sha256 = \"{digest}\"\nrole = \"admin\"\n"),
        "gateway.toml:7:1: [console]: unknown key `role` (expected one of name, token_sha256, token_env)",
    );
}

#[test]
fn console_users_are_lowered_with_their_token_hashed() {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let text = format!(
        "{ONE}[[console.user]]\nname = \"alice\"\ntoken_sha256 = \"{digest}\"\n\
         [[console.user]]\nname = \"bob\"\ntoken_env = \"BOB_CONSOLE_TOKEN\"\n"
    );
    let env = |name: &str| (name == "BOB_CONSOLE_TOKEN").then(|| "bob-secret".to_owned());
    let (_, console) =
        crate::parse_config_with_console(&text, std::path::Path::new("gateway.toml"), &env).expect("parses");
    let users: Vec<(&str, &str)> =
        console.users.iter().map(|user| (user.name.as_str(), user.token_sha256.as_str())).collect();
    let bob = toolgate_core::fingerprint::digest_bytes(b"bob-secret");
    assert_eq!(users, [("alice", digest.as_str()), ("bob", bob.as_str())]);
    assert!(!format!("{console:?}").contains("sha256"), "no hash in debug output: {console:?}");
    let (_, none) = crate::parse_config_with_console(ONE, std::path::Path::new("gateway.toml"), &env).expect("parses");
    assert!(none.users.is_empty());
}

#[test]
fn console_sso_errors_name_their_line() {
    let sso = |issuer: &str, redirect: &str, extra: &str| {
        format!(
            "{ONE}[console.sso]\nissuer = \"{issuer}\"\nclient_id = \"console\"\nredirect_uri = \"{redirect}\"\n{extra}"
        )
    };
    let callback = "https://gw.example/console/sso/callback";
    check_error(
        &sso("http://idp.example", callback, ""),
        "gateway.toml:5:10: [console.sso]: `issuer` must use https:// (http:// only on loopback: the ID token and \
         code would travel in the clear)",
    );
    check_error(
        &sso("https://idp.example", "https://gw.example/elsewhere", ""),
        "gateway.toml:7:16: [console.sso]: `redirect_uri` must be the console's `/console/sso/callback` URL as \
         browsers reach it",
    );
    check_error(
        &sso("https://idp.example", callback, "client_secret_env = \"UNSET_SECRET\"\n"),
        "gateway.toml:8:21: [console.sso]: environment variable `UNSET_SECRET` (client_secret_env) is not set",
    );
    check_error(
        &sso("https://idp.example", callback, "approver = \"x\"\n"),
        "gateway.toml:8:1: [console]: unknown key `approver` (expected one of issuer, client_id, client_secret_env, \
         redirect_uri, scopes, groups_claim, approver_group, max_session_seconds, post_logout_redirect_uri)",
    );
    check_error(
        &sso(
            "https://idp.example",
            callback,
            "max_session_seconds = 0
",
        ),
        "gateway.toml:8:23: [console.sso]: `max_session_seconds` must be at least 1",
    );
    check_error(
        &sso("https://idp.example", callback, "post_logout_redirect_uri = \"http://gw.example/console/login\"\n"),
        "gateway.toml:8:28: [console.sso]: `post_logout_redirect_uri` must use https:// (http:// only on loopback: \
         the ID token and code would travel in the clear)",
    );
}

#[test]
fn console_sso_is_lowered_with_its_secret_from_the_environment() {
    let text = format!(
        "{ONE}[console]\nforbid_self_approval = true\n[console.sso]\nissuer = \"http://127.0.0.1:9000\"\n\
         client_id = \"console\"\nclient_secret_env = \"SSO_SECRET\"\n\
         redirect_uri = \"http://localhost:8765/console/sso/callback\"\nscopes = [\"groups\"]\n\
         approver_group = \"approvers\"\nmax_session_seconds = 3600\n\
         post_logout_redirect_uri = \"http://localhost:8765/console/login\"\n"
    );
    let env = |name: &str| (name == "SSO_SECRET").then(|| "s3cret".to_owned());
    let (_, console) =
        crate::parse_config_with_console(&text, std::path::Path::new("gateway.toml"), &env).expect("parses");
    assert!(console.forbid_self_approval);
    let sso = console.sso.as_ref().expect("sso");
    assert_eq!(sso.client_secret.as_deref(), Some("s3cret"));
    assert_eq!(sso.scopes, ["openid", "groups"], "openid is always asked for");
    assert_eq!((sso.groups_claim.as_str(), sso.approver_group.as_deref()), ("groups", Some("approvers")));
    assert_eq!(sso.max_session, std::time::Duration::from_secs(3600));
    assert_eq!(sso.post_logout_redirect_uri.as_deref(), Some("http://localhost:8765/console/login"));
    assert!(!format!("{console:?}").contains("s3cret"), "no secret in debug output: {console:?}");
}

#[test]
fn store_errors() {
    check_error(
        &format!("{ONE}[store]\nurl = \"postgres://toolgate:s3cret@db/toolgate\"\n"),
        "gateway.toml:5:7: [store]: `url` holds a password: a password never sits in the config file; remove it and \
         give it in PGPASSWORD or ~/.pgpass, or put the whole URL in an environment variable named by `url_env`",
    );
    check_error(
        &format!("{ONE}[store]\nurl = \"sqlite:state.db\"\n"),
        "gateway.toml:5:7: [store]: `url` must be a postgres:// URL (SQLite needs no `[store]` url)",
    );
    check_error(
        &format!("{ONE}[store]\nurl = \"postgres://db/t\"\nurl_env = \"X\"\n"),
        "gateway.toml:6:11: [store]: set either `url` or `url_env`, not both",
    );
    check_error(
        &format!("{ONE}[store]\nurl_env = \"TOOLGATE_TEST_UNSET_STORE_URL\"\n"),
        "gateway.toml:5:11: [store]: `url_env`: the variable TOOLGATE_TEST_UNSET_STORE_URL is not set",
    );
    check_error(
        &format!("{ONE}[store]\nurl = \"postgres://db/t\"\nmax_connections = 0\ninstance_id = \"a b\"\n"),
        "gateway.toml:6:19: [store]: `max_connections` must be between 1 and 1000\n\
         gateway.toml:7:15: [store]: `instance_id` must be 1 to 64 letters, digits, '-', '_' or '.'",
    );
}
