//! `toolgate manifest`: keygen, sign, verify; a changed tool, an added one, a removed one, a changed manifest and
//! a key that is not accepted all fail verification with exit 1, naming what differs.

use serde_json::{Value, json};

use crate::support::{toolgate, toolgate_binary};

fn tools() -> Value {
    json!({"tools": [
        {"name": "list_files", "description": "Lists files.", "annotations": {"readOnlyHint": true}},
        {"name": "delete_file", "description": "Deletes a file.", "annotations": {"destructiveHint": true}},
    ]})
}

fn write_json(path: &std::path::Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

#[test]
fn keygen_sign_verify_then_tampering_fails() {
    let directory = tempfile::tempdir().unwrap();
    let key = directory.path().join("signing.key");
    let key_arg = key.to_str().unwrap();
    let keygen = toolgate(&["manifest", "keygen", "--out", key_arg]);
    assert_eq!(keygen.code, Some(0), "{keygen:?}");
    let public_key = keygen.stdout.trim().to_owned();
    assert_eq!(public_key.len(), 44, "base64 of 32 bytes: {public_key}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let again = toolgate(&["manifest", "keygen", "--out", key_arg]);
    assert_eq!(again.code, Some(2), "never overwrites: {again:?}");

    let tools_file = directory.path().join("tools.json");
    write_json(&tools_file, &tools());
    let manifest_file = directory.path().join("manifest.json");
    let tools_arg = tools_file.to_str().unwrap();
    let manifest_arg = manifest_file.to_str().unwrap();
    let sign = toolgate(&["manifest", "sign", "--key", key_arg, "--tools", tools_arg, "--out", manifest_arg]);
    assert_eq!(sign.code, Some(0), "{sign:?}");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(&manifest_file).unwrap()).unwrap();
    assert_eq!(manifest["version"], 1);
    assert_eq!(manifest["public_key"], public_key.as_str());
    assert_eq!(manifest["tools"][0]["name"], "list_files");
    assert!(manifest["tools"][0]["fingerprint"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(manifest["tools"][0]["annotations"]["readOnlyHint"], true);
    assert_eq!(manifest["tools"][1]["annotations"]["destructiveHint"], true);

    let verify = |public_key: &str, manifest: &str| {
        toolgate(&["manifest", "verify", "--public-key", public_key, manifest, "--tools", tools_arg])
    };
    let ok = verify(&public_key, manifest_arg);
    assert_eq!(ok.code, Some(0), "{ok:?}");
    assert!(ok.stdout.contains("signature valid: 2 tool(s)") && ok.stdout.contains("all 2 tool(s) match"), "{ok:?}");
    // A key file works as well as the key's text.
    let public_key_file = directory.path().join("signing.pub");
    std::fs::write(&public_key_file, format!("{public_key}\n")).unwrap();
    assert_eq!(verify(public_key_file.to_str().unwrap(), manifest_arg).code, Some(0));

    // The server changes a tool, adds one and drops one.
    let mut drifted = tools();
    drifted["tools"][1]["description"] = json!("Deletes every file.");
    drifted["tools"].as_array_mut().unwrap().push(json!({"name": "format_disk"}));
    drifted["tools"].as_array_mut().unwrap().remove(0);
    write_json(&tools_file, &drifted);
    let mismatch = verify(&public_key, manifest_arg);
    assert_eq!(mismatch.code, Some(1), "{mismatch:?}");
    assert!(mismatch.stdout.contains("changed: delete_file (signed sha256:"), "{}", mismatch.stdout);
    assert!(mismatch.stdout.contains("added:   format_disk"), "{}", mismatch.stdout);
    assert!(mismatch.stdout.contains("removed: list_files"), "{}", mismatch.stdout);
    assert!(mismatch.stdout.contains("MISMATCH: 1 changed, 1 added, 1 removed, 0 matching"), "{}", mismatch.stdout);
    write_json(&tools_file, &tools());

    // Someone edits the manifest to bless a changed definition.
    let mut edited = manifest.clone();
    edited["tools"][1]["annotations"]["destructiveHint"] = json!(false);
    let edited_file = directory.path().join("edited.json");
    write_json(&edited_file, &edited);
    let forged = verify(&public_key, edited_file.to_str().unwrap());
    assert_eq!(forged.code, Some(1), "{forged:?}");
    assert!(forged.stdout.contains("signature INVALID: the signature does not match the content"), "{forged:?}");

    // A manifest signed by another key is not accepted, even though its own signature is sound.
    let other_key = directory.path().join("other.key");
    let other = toolgate(&["manifest", "keygen", "--out", other_key.to_str().unwrap()]);
    let wrong = verify(other.stdout.trim(), manifest_arg);
    assert_eq!(wrong.code, Some(1), "{wrong:?}");
    assert!(wrong.stdout.contains("which is not an accepted key"), "{wrong:?}");

    let garbage = verify("not-a-key", manifest_arg);
    assert_eq!(garbage.code, Some(2), "{garbage:?}");
}

#[test]
fn a_live_server_signs_and_verifies() {
    let directory = tempfile::tempdir().unwrap();
    let key = directory.path().join("signing.key");
    let keygen = toolgate(&["manifest", "keygen", "--out", key.to_str().unwrap()]);
    let public_key = keygen.stdout.trim().to_owned();
    let manifest_file = directory.path().join("demo.json");
    let sign = toolgate(&[
        "manifest",
        "sign",
        "--key",
        key.to_str().unwrap(),
        "--out",
        manifest_file.to_str().unwrap(),
        "--",
        toolgate_binary().to_str().unwrap(),
        "demo-server",
    ]);
    assert_eq!(sign.code, Some(0), "{sign:?}");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(&manifest_file).unwrap()).unwrap();
    assert_eq!(manifest["server"]["name"], "toolgate-demo");
    let verify = toolgate(&[
        "manifest",
        "verify",
        "--public-key",
        &public_key,
        manifest_file.to_str().unwrap(),
        "--",
        toolgate_binary().to_str().unwrap(),
        "demo-server",
    ]);
    assert_eq!(verify.code, Some(0), "{verify:?}");
    assert!(verify.stdout.contains("match the manifest"), "{}", verify.stdout);
}
