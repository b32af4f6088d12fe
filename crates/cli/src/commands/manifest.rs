//! `toolgate manifest keygen | sign | verify`: Ed25519-signed manifests of a server's tool definitions.
//!
//! The format and the signed bytes are defined in `toolgate_core::manifest` (pure); the cryptography lives here so
//! the core never depends on it. Key files hold the 32-byte secret seed as base64 (mode 0600, never overwritten);
//! public keys and signatures are standard base64. Verification uses `verify_strict` (no malleable signatures)
//! and accepts a manifest only when its embedded `public_key` is one of the keys the person named, so a manifest
//! cannot bring its own signer. Checking a signature is `crate::manifests`' (shared with `serve` and the views).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::Value;
use toolgate_core::display::{bounded, json_safe};
use toolgate_core::manifest::{
    MANIFEST_VERSION, Manifest, ManifestServer, compare_manifest, manifest_tool, signing_payload,
};
use toolgate_store::format_rfc3339;

use crate::Outcome;
use crate::cli::{ManifestAction, ManifestArgs, ToolsArgs};
use crate::commands::prompt::assessed_tools;
use crate::manifests::{SignatureCheck, verify_manifest_file};

/// Longest server or tool name, time or key shown (names come from the server and the manifest file).
const NAME_CHARS: usize = 120;

/// Longest reason shown for an invalid signature.
const REASON_CHARS: usize = 600;

pub(crate) async fn run(args: ManifestArgs) -> Result<Outcome> {
    match args.action {
        ManifestAction::Keygen { out } => keygen(&out),
        ManifestAction::Sign { key, source, out } => sign(&key, &source, out.as_deref()).await,
        ManifestAction::Verify { public_keys, manifest, source } => verify(&public_keys, &manifest, &source).await,
    }
}

fn keygen(out: &Path) -> Result<Outcome> {
    let mut seed = [0_u8; 32];
    getrandom::fill(&mut seed).map_err(|error| anyhow!("cannot get randomness from the operating system: {error}"))?;
    let key = SigningKey::from_bytes(&seed);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(out).map_err(|error| match error.kind() {
        std::io::ErrorKind::AlreadyExists => anyhow!("{} already exists; keys are never overwritten", out.display()),
        _ => anyhow!("cannot create {}: {error}", out.display()),
    })?;
    file.write_all(format!("{}\n", STANDARD.encode(seed)).as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", out.display()))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", STANDARD.encode(key.verifying_key().to_bytes()))?;
    Ok(Outcome::Clean)
}

fn read_signing_key(path: &Path) -> Result<SigningKey> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read key file {}", path.display()))?;
    let bytes =
        STANDARD.decode(text.trim()).map_err(|error| anyhow!("{}: not a base64 key file: {error}", path.display()))?;
    let seed: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
        anyhow!("{}: a key file holds a 32-byte seed, this one has {} bytes", path.display(), bytes.len())
    })?;
    Ok(SigningKey::from_bytes(&seed))
}

async fn sign(key_path: &Path, source_args: &ToolsArgs, out: Option<&Path>) -> Result<Outcome> {
    let key = read_signing_key(key_path)?;
    let (source, tools) = assessed_tools(source_args).await?;
    let entries = tools
        .iter()
        .map(|tool| manifest_tool(&tool.definition, &tool.assessment.effective))
        .collect::<Result<Vec<_>, _>>()?;
    let manifest = Manifest {
        version: MANIFEST_VERSION,
        server: ManifestServer { name: source.server.name.clone(), version: source.server.version.clone() },
        tools: entries,
        signed_at: format_rfc3339(SystemTime::now()),
        public_key: STANDARD.encode(key.verifying_key().to_bytes()),
        signature: None,
    };
    let mut value = serde_json::to_value(&manifest)?;
    let payload = signing_payload(&value)?;
    let signature = key.sign(payload.as_bytes());
    if let Value::Object(object) = &mut value {
        object.insert("signature".into(), Value::from(STANDARD.encode(signature.to_bytes())));
    }
    let mut text = serde_json::to_string_pretty(&value)?;
    text.push('\n');
    match out {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "signed {} tool(s) of {} into {}",
                manifest.tools.len(),
                bounded(&manifest.server.name, NAME_CHARS),
                path.display()
            );
        }
        // The same JSON value, with no raw control or bidi character from the server's texts on a terminal.
        None => std::io::stdout().lock().write_all(json_safe(&text).as_bytes())?,
    }
    Ok(Outcome::Clean)
}

async fn verify(public_keys: &[String], path: &Path, source_args: &ToolsArgs) -> Result<Outcome> {
    let manifest = match verify_manifest_file(path, public_keys)? {
        SignatureCheck::Valid(manifest) => manifest,
        SignatureCheck::Invalid(reason) => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "signature INVALID: {}", bounded(&reason, REASON_CHARS))?;
            return Ok(Outcome::Findings);
        }
    };
    let (_, tools) = assessed_tools(source_args).await?;
    let current = tools
        .iter()
        .map(|tool| Ok((tool.definition.name().to_owned(), tool.assessment.fingerprint.clone()?.whole)))
        .collect::<Result<Vec<_>>>()?;
    let comparison = compare_manifest(&manifest, &current);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "signature valid: {} tool(s) of {} signed at {} by {}",
        manifest.tools.len(),
        bounded(&manifest.server.name, NAME_CHARS),
        bounded(&manifest.signed_at, NAME_CHARS),
        bounded(&manifest.public_key, NAME_CHARS)
    );
    // Names come from the server (and the manifest file): escaped and bounded like every other view.
    for (name, signed, now) in &comparison.changed {
        let (name, signed, now) = (bounded(name, NAME_CHARS), bounded(signed, NAME_CHARS), bounded(now, NAME_CHARS));
        let _ = writeln!(text, "changed: {name} (signed {signed}, now {now})");
    }
    for name in &comparison.added {
        let _ = writeln!(text, "added:   {} (not in the manifest)", bounded(name, NAME_CHARS));
    }
    for name in &comparison.removed {
        let _ = writeln!(text, "removed: {} (in the manifest, not listed now)", bounded(name, NAME_CHARS));
    }
    let outcome = if comparison.is_exact() {
        let _ = writeln!(text, "all {} tool(s) match the manifest", comparison.matching.len());
        Outcome::Clean
    } else {
        let _ = writeln!(
            text,
            "MISMATCH: {} changed, {} added, {} removed, {} matching",
            comparison.changed.len(),
            comparison.added.len(),
            comparison.removed.len(),
            comparison.matching.len()
        );
        Outcome::Findings
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(outcome)
}
