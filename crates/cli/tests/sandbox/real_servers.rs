//! Real servers still work sandboxed under `auto`: server-filesystem writing in its root (listed writable),
//! server-memory keeping its memory file (its directory listed writable), and server-everything (no writable path).

use serde_json::json;
use toolgate_test_support::PeerCommand;
use toolgate_test_support::Peers;

use crate::{Sandboxed, call, is_error, texts};

fn upstream(name: &str, peer: &PeerCommand, sandbox: &str) -> String {
    let mut env: Vec<String> = peer.env.iter().map(|(key, value)| format!("{key} = {value:?}")).collect();
    if !peer.env.iter().any(|(key, _)| key == "PATH") {
        env.push(format!("PATH = {:?}", Peers::locate().path_env()));
    }
    format!(
        "[[upstream]]\nname = \"{name}\"\nprefix = true\ncommand = {:?}\nargs = {:?}\nenv = {{ {} }}\n\
         [upstream.sandbox]\n{sandbox}\n",
        peer.program.to_string_lossy(),
        peer.args,
        env.join(", ")
    )
}

#[test]
fn real_servers_work_under_auto() {
    let peers = Peers::locate();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let memory = dir.path().join("memory");
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&memory).unwrap();
    let writable = |path: &std::path::Path| format!("mode = \"auto\"\nwritable = [{:?}]", path.to_string_lossy());
    let config = [
        upstream("fs", &peers.server_filesystem(&root), &writable(&root)),
        upstream("mem", &peers.server_memory(&memory.join("memory.jsonl")), &writable(&memory)),
        upstream("every", &peers.server_everything(), "mode = \"auto\""),
    ]
    .join("\n");
    let gateway = Sandboxed::start(dir, &config, &[]);
    let mut session = gateway.session();
    // Every upstream ready (server-everything may be started twice: its open-world tools need the network).
    toolgate_test_support::toolgate::poll("every upstream's tools", || {
        let listed = session.request("tools/list", json!({})).ok()?;
        let names = listed["result"]["tools"].to_string();
        (names.contains("fs_write_file") && names.contains("mem_create_entities") && names.contains("every_echo"))
            .then_some(())
    });

    let path = root.join("hello.txt");
    let written = call(&mut session, "fs_write_file", json!({"path": path, "content": "sandboxed"}));
    assert!(!is_error(&written), "{written}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "sandboxed");
    let read = call(&mut session, "fs_read_text_file", json!({"path": path}));
    assert!(texts(&read).contains("sandboxed"), "{read}");

    let entities = json!({"entities": [{"name": "toolgate", "entityType": "gateway", "observations": ["sandboxed"]}]});
    let created = call(&mut session, "mem_create_entities", entities);
    assert!(!is_error(&created), "{created}");
    assert!(std::fs::read_to_string(memory.join("memory.jsonl")).unwrap().contains("toolgate"));

    let echoed = call(&mut session, "every_echo", json!({"message": "inside"}));
    assert!(texts(&echoed).contains("inside"), "{echoed}");
}
