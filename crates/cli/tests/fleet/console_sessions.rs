//! Console sessions on any process of a fleet (issue 16): HAProxy sends the console to any process (the shipped
//! config has no affinity), so a session opened on process 1 must be accepted by process 2, with the CSRF token
//! process 1's page carried, and a logout on process 2 must end it on process 1. A cookie changed by one character
//! and a cookie sealed by a gateway on another store are refused.

use std::sync::mpsc;

use serde_json::{Value, json};
use toolgate_test_support::HANG_GUARD;
use toolgate_test_support::toolgate::raw_http::HttpSession;
use toolgate_test_support::toolgate::{Setup, poll, start_serve};

use crate::console::{Console, form_fields, status_of, user_config};
use crate::start_fleet;

#[test]
fn a_console_session_opened_on_one_process_works_on_another_until_logged_out_anywhere() {
    let setup = Setup::demo(&format!(
        "[confirmation]\ntimeout_seconds = 120\n\n[policy]\nsession_taint = false\n\n\
         [[policy.rule]]\nid = \"ask-notes\"\neffect = \"confirm\"\nmatch = {{ tool = \"add_note\" }}\n\n{}",
        user_config()
    ));
    let fleet = start_fleet(&setup, 2);
    let (first, second) = (fleet.process(0).authority.clone(), fleet.process(1).authority.clone());

    // A call waits for a person.
    let (sender, receiver) = mpsc::channel();
    let balancer = fleet.balancer.authority.clone();
    std::thread::spawn(move || {
        let mut session = HttpSession::open(&balancer, &[]).expect("a session through the balancer");
        let arguments = json!({"title": "fleet", "body": "approved on the other process"});
        let _ = sender.send(session.request("tools/call", json!({"name": "add_note", "arguments": arguments})));
    });
    let id = poll("the queued approval", || {
        let run = fleet.toolgate(&["approvals", "list", "--json"]);
        let entry: Value = serde_json::from_str(run.stdout.lines().next()?).ok()?;
        entry["id"].as_str().map(str::to_owned)
    });

    // Logged in on process 1; its page's CSRF token.
    let on_first = Console::login(&first);
    let first_page = on_first.get("/console");
    assert_eq!(status_of(&first_page), 200, "{first_page}");
    let logout_fields = form_fields(&first_page, "/console/logout");

    // The same cookie on process 2 lists the approval and approves it with process 1's CSRF token.
    let on_second = on_first.at(&second);
    let action = format!("/console/approvals/{id}/approve");
    let second_page = poll("the approval on process 2's console", || {
        let page = on_second.get("/console");
        assert_eq!(status_of(&page), 200, "process 2 accepts process 1's session:\n{page}");
        page.contains(&action).then_some(page)
    });
    let csrf = form_fields(&second_page, &action);
    assert_eq!(
        csrf.iter().find(|(name, _)| name == "csrf"),
        logout_fields.iter().find(|(name, _)| name == "csrf"),
        "one session, one CSRF token, whichever process rendered it"
    );
    let decided = on_second.post(&action, &logout_fields);
    assert_eq!(status_of(&decided), 303, "process 2 took the decision with process 1's token:\n{decided}");
    let answer = receiver.recv_timeout(HANG_GUARD).expect("the waiting call ends").expect("answered");
    assert!(answer.get("result").is_some() && answer["result"]["isError"] != json!(true), "{answer}");

    // A tampered cookie is refused on both processes; the genuine one still works.
    let cookie = on_first.cookie().to_owned();
    let last = cookie.chars().last().expect("a cookie value");
    let flipped = if last == '0' { '1' } else { '0' };
    let tampered = on_first.with_cookie(format!("{}{flipped}", &cookie[..cookie.len() - 1]));
    for authority in [&first, &second] {
        assert_eq!(status_of(&tampered.at(authority).get("/console")), 401, "a tampered cookie on {authority}");
    }

    // A gateway on another store (its own SQLite state) refuses this fleet's cookie, and the fleet refuses its.
    let other_setup = Setup::demo(&user_config());
    let other = start_serve(&other_setup, &[]);
    assert_eq!(status_of(&on_first.at(&other.authority).get("/console")), 401, "another store's gateway");
    let on_other = Console::login(&other.authority);
    assert_eq!(status_of(&on_other.get("/console")), 200);
    for authority in [&first, &second] {
        assert_eq!(status_of(&on_other.at(authority).get("/console")), 401, "another store's cookie on {authority}");
    }

    // Logging out on process 2 ends the session on process 1 too.
    let logged_out = on_second.post("/console/logout", &logout_fields);
    assert_eq!(status_of(&logged_out), 200, "{logged_out}");
    for authority in [&first, &second] {
        assert_eq!(status_of(&on_first.at(authority).get("/console")), 401, "after logout, on {authority}");
    }
    // A new login still works on either.
    assert_eq!(status_of(&Console::login(&first).at(&second).get("/console")), 200);
}
