//! Issue 12, URL mode, end to end through `toolgate serve`: a raw 2026-07-28 HTTP client that declared only URL
//! elicitation is answered `input_required` with the console's page of a detached approval (the URL built from
//! `[confirmation] console_url`); a person logged in to the console reads the call there (escaped) and approves or
//! denies it with the page's forms; the client's retry is forwarded once, or refused, also when it reaches another
//! process on the same store, and `toolgate approvals list` says the approval waits for the client's retry. The
//! Python SDK 2.3 `Client` (`guardrail_clients/url_approver.py`) does the same with a URL-mode elicitation callback
//! that approves on the console's page over HTTP.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::toolgate::raw_http;

use crate::support::{Serve, Setup, clients_dir, run_guarded, start_serve, toolgate};

/// A second `toolgate serve` on the same state directory (so the same store) and another port: another process a
/// balancer could send the client's retry to. Its console URL still names the first process's console.
fn second_process(setup: &Setup) -> Serve {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|free| free.local_addr()).expect("a port").port();
    let text = std::fs::read_to_string(&setup.config).expect("the config");
    let bind = text.split("bind = \"").nth(1).and_then(|rest| rest.split('"').next()).expect("a bind").to_owned();
    let config = setup.dir.path().join("gateway-b.toml");
    std::fs::write(&config, text.replace(&format!("bind = \"{bind}\""), &format!("bind = \"127.0.0.1:{port}\"")))
        .expect("write it");
    let mut command = toolgate_test_support::toolgate::command();
    command.args(["serve", "--config"]).arg(&config).arg("--state-dir").arg(setup.state()).env("TOOLGATE_LOG", "info");
    Serve::start(command)
}

const MODERN: &str = "2026-07-28";
const REVIEWER: &str = "reviewer-url-mode-4f1d2c9e8a7b6c5d";

/// The demo behind `toolgate serve` on a port chosen now (the console URL names it before the process starts),
/// with a console user and URL-mode confirmations; a pending retry waits a second before it is asked again.
fn serve() -> (Serve, Setup, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|free| free.local_addr()).expect("a port").port();
    let console = format!("http://127.0.0.1:{port}/console");
    let setup = Setup::demo(&format!(
        "[confirmation]\ntimeout_seconds = 1\nmodern = \"console\"\nconsole_url = \"{console}\"\n\n\
         [[console.user]]\nname = \"reviewer\"\ntoken_sha256 = \"{}\"\n",
        toolgate_core::fingerprint::digest_bytes(REVIEWER.as_bytes())
    ));
    let text = std::fs::read_to_string(&setup.config).expect("the config");
    std::fs::write(&setup.config, text.replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))).expect("write it");
    let serve = start_serve(&setup, &[]);
    (serve, setup, console)
}

/// A 2026-07-28 `tools/call` of `delete_note` that declared URL elicitation only; `extra` merged into its params.
fn call(serve: &Serve, id: &str, arguments: &Value, extra: Value) -> Value {
    let mut params = json!({
        "name": "delete_note",
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}},
        },
    });
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        params[key] = value;
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let headers = [("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", "delete_note")];
    let reply = raw_http::post(&serve.authority, &headers, &body).expect("toolgate answers");
    reply.response(&json!(id)).unwrap_or_else(|| panic!("no response to {id}: {reply:?}"))
}

/// The console page a URL round points to (its path) and the round's state.
fn url_round(response: &Value, console: &str) -> (String, String) {
    let result = &response["result"];
    assert_eq!(result["resultType"], "input_required", "{response}");
    let params = &result["inputRequests"]["toolgate/confirm"]["params"];
    assert_eq!(params["mode"], "url", "{response}");
    let url = params["url"].as_str().expect("a url");
    let path = url.strip_prefix(console.trim_end_matches("/console")).expect("under the configured console URL");
    assert!(path.starts_with("/console/approvals/"), "{url}");
    (path.to_owned(), result["requestState"].as_str().expect("a state").to_owned())
}

fn retry(serve: &Serve, id: &str, arguments: &Value, state: &str) -> Value {
    call(
        serve,
        id,
        arguments,
        json!({"requestState": state, "inputResponses": {"toolgate/confirm": {"action": "accept"}}}),
    )
}

/// A console session over raw HTTP: the login form with the reviewer's token, then pages and forms with its cookie.
struct Console {
    authority: String,
    cookie: Option<String>,
}

impl Console {
    fn login(authority: &str) -> Console {
        let anonymous = Console { authority: authority.to_owned(), cookie: None };
        let answer = anonymous.request("POST", "/console/login", &format!("token={REVIEWER}"));
        let cookie = answer
            .lines()
            .take_while(|line| !line.is_empty())
            .filter_map(|line| line.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("set-cookie"))
            .and_then(|(_, value)| value.trim().split(';').next().map(str::to_owned));
        assert!(cookie.is_some(), "the console login sets a cookie:\n{answer}");
        Console { authority: authority.to_owned(), cookie }
    }

    fn request(&self, method: &str, path: &str, body: &str) -> String {
        let mut stream = TcpStream::connect(&self.authority).expect("connect to the console");
        stream.set_read_timeout(Some(HANG_GUARD)).expect("read timeout");
        let cookie = self.cookie.as_ref().map(|cookie| format!("Cookie: {cookie}\r\n")).unwrap_or_default();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{cookie}Content-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.authority,
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).expect("read");
        raw
    }

    /// Posts the page's form to `action` with its hidden fields (the CSRF token and the way back).
    fn submit(&self, page: &str, action: &str) -> String {
        let start =
            page.find(&format!("action=\"{action}\"")).unwrap_or_else(|| panic!("no form to {action}:\n{page}"));
        let form = &page[start..start + page[start..].find("</form>").expect("the form ends")];
        let fields: Vec<String> = form
            .split("<input type=\"hidden\" ")
            .skip(1)
            .filter_map(|input| {
                let name = input.split("name=\"").nth(1)?.split('"').next()?;
                let value = input.split("value=\"").nth(1)?.split('"').next()?;
                Some(format!("{name}={value}"))
            })
            .collect();
        self.request("POST", action, &fields.join("&"))
    }
}

fn status_of(answer: &str) -> u16 {
    answer.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn issue_12_a_url_mode_confirmation_is_decided_on_the_consoles_page_and_the_retry_runs_once() {
    let (serve, setup, console_url) = serve();
    let state_dir = setup.state_arg();
    let arguments = json!({"id": 1});

    let (page_path, state) = url_round(&call(&serve, "ask", &arguments, json!({})), &console_url);
    let listed = toolgate(&["approvals", "list", "--state-dir", &state_dir]);
    assert!(listed.stdout.contains("no call waits: the client retries the call once this is decided"), "{listed:?}");

    // Not logged in: 401, with a same-site link back to the page.
    let anonymous = Console { authority: serve.authority.clone(), cookie: None };
    let refused = anonymous.request("GET", &page_path, "");
    assert_eq!(status_of(&refused), 401, "{refused}");
    assert!(refused.contains(&format!("href=\"{page_path}\"")), "{refused}");

    let console = Console::login(&serve.authority);
    let page = console.request("GET", &page_path, "");
    assert_eq!(status_of(&page), 200, "{page}");
    assert!(page.contains("delete_note") && page.contains("&quot;id&quot;: 1"), "the call is shown: {page}");
    assert!(page.contains("the client retries the call once you decide"), "{page}");

    // Retried before anyone decided: the same page again, and still nothing ran.
    let (again, state) = url_round(&retry(&serve, "early", &arguments, &state), &console_url);
    assert_eq!(again, page_path, "the same approval");

    let approved = console.submit(&page, &format!("{page_path}/approve"));
    assert_eq!(status_of(&approved), 303, "{approved}");
    assert!(
        approved.contains(&format!("location: {page_path}")) || approved.contains(&format!("Location: {page_path}"))
    );
    let decided = console.request("GET", &page_path, "");
    assert!(decided.contains("Approved by console:reviewer"), "{decided}");

    let done = retry(&serve, "yes", &arguments, &state);
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text(&done).starts_with("deleted note 1"), "{done}");
    let replayed = retry(&serve, "again", &arguments, &state);
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");

    // The upstream ran once, and the person who approved is on the record.
    let rows = crate::support::poll("the forwarded call's row", || {
        let audit = toolgate(&["audit", "--json", "--state-dir", &state_dir]);
        let rows: Vec<Value> = audit.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
        rows.iter().any(|row| row["kind"] == "call" && row["outcome"] == "ok").then_some(rows)
    });
    let forwarded = rows.iter().filter(|row| row["kind"] == "call" && row["outcome"] == "ok").count();
    assert_eq!(forwarded, 1, "{rows:#?}");
    assert!(
        rows.iter().any(|row| row["kind"] == "confirmation" && row["detail"]["decided_by"] == "console:reviewer"),
        "{rows:#?}"
    );
}

#[test]
fn issue_12_a_url_mode_confirmation_denied_on_the_consoles_page_is_refused_and_its_page_escapes_the_call() {
    let (serve, _setup, console_url) = serve();
    // Never reaches the upstream (denied), so arguments the demo would refuse are fine here.
    let arguments = json!({"id": 2, "note": "</pre><script>alert(1)</script>\u{202e}"});
    let (page_path, state) = url_round(&call(&serve, "ask", &arguments, json!({})), &console_url);
    let console = Console::login(&serve.authority);
    let page = console.request("GET", &page_path, "");
    assert!(!page.contains("<script>alert"), "escaped: {page}");
    assert!(page.contains("&lt;script&gt;") && page.contains("\\u202e"), "{page}");

    let denied = console.submit(&page, &format!("{page_path}/deny"));
    assert_eq!(status_of(&denied), 303, "{denied}");
    let refused = retry(&serve, "no", &arguments, &state);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text(&refused).contains("console:reviewer denied this call"), "{refused}");
}

#[test]
fn issue_12_a_url_mode_retry_may_land_on_another_process_sharing_the_store() {
    let (first, setup, console_url) = serve();
    let second = second_process(&setup);
    let arguments = json!({"id": 1});
    let (page_path, state) = url_round(&call(&first, "ask", &arguments, json!({})), &console_url);

    // Undecided, retried on the other process: the same approval, read from the store.
    let (again, state) = url_round(&retry(&second, "early", &arguments, &state), &console_url);
    assert_eq!(again, page_path, "the same approval, not a second one");

    let console = Console::login(&first.authority);
    let page = console.request("GET", &page_path, "");
    assert_eq!(status_of(&console.submit(&page, &format!("{page_path}/approve"))), 303);
    let done = retry(&second, "yes", &arguments, &state);
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text(&done).starts_with("deleted note 1"), "{done}");
    // Used once, whichever process is asked next.
    let replayed = retry(&first, "again", &arguments, &state);
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
}

#[test]
fn issue_12_the_python_sdk_client_approves_through_the_console_page_it_is_sent_to() {
    let peers = toolgate_test_support::Peers::locate();
    let (serve, _setup, console_url) = serve();
    let mut command = std::process::Command::new(peers.python());
    command.env("PYTHONDONTWRITEBYTECODE", "1").arg(clients_dir().join("url_approver.py")).args([
        "--url",
        &format!("http://{}/mcp", serve.authority),
        "--console-token",
        REVIEWER,
        "--note",
        "3",
    ]);
    let run = run_guarded(command, "the SDK client");
    let line = run.stdout.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or_default();
    let findings: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("the client failed: {run:?}"));
    let asked = findings["asked"].as_array().cloned().unwrap_or_default();
    assert!(!asked.is_empty(), "{findings}");
    assert_eq!(asked[0]["mode"], "url", "{findings}");
    assert!(
        asked[0]["url"].as_str().unwrap_or_default().starts_with(&format!("{console_url}/approvals/")),
        "{findings}"
    );
    assert_eq!(asked[0]["decided"], 303, "approved on the page: {findings}");
    assert_eq!(findings["isError"], false, "{findings}");
    let texts = findings["texts"].as_array().cloned().unwrap_or_default();
    assert!(texts.iter().any(|text| text.as_str().unwrap_or_default().starts_with("deleted note 3")), "{findings}");
}
