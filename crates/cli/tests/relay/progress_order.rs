//! Every progress notification an upstream sends before its response reaches the client before that response.
//!
//! server-everything awaits each `notifications/progress` before it answers, so on its side progress always comes
//! first; a client drops progress that arrives after the response (the request is over), so a relay that lets the
//! response overtake progress, or drops progress once the response is in, loses the final steps.

use serde_json::{Value, json};

use crate::protocol::{everything, long_call, progress_for};
use crate::support::is_response_to;

#[test]
fn every_progress_arrives_before_the_response() {
    let mut client = everything();
    let mut incomplete = Vec::new();
    for round in 0..8 {
        let id = client.next_id();
        let token = json!(format!("round-{round}"));
        long_call(&mut client, &id, &token, 1, 3);
        client.read_until("the long call's response", |message| is_response_to(message, &id));
        let values: Vec<Value> = progress_for(&client.received, &token)
            .iter()
            .map(|message| message["params"]["progress"].clone())
            .collect();
        if values != [json!(1), json!(2), json!(3)] {
            incomplete.push((round, values));
        }
    }
    assert!(incomplete.is_empty(), "progress missing before the response (round, progress seen): {incomplete:?}");
}
