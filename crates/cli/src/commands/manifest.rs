//! `toolgate manifest keygen | sign | verify`: Ed25519-signed manifests of a server's tool definitions.
//!
//! The format and the signed bytes are defined in `toolgate_core::manifest` (pure); the cryptography lives here so
//! the core never depends on it. Key files hold the 32-byte secret seed as base64 (mode 0600, never overwritten);
//! public keys and signatures are standard base64. Verification uses `verify_strict` (no malleable signatures)
//! and accepts a manifest only when its embedded `public_key` is one of the keys the person named, so a manifest
//! cannot bring its own signer. [`verify_manifest_file`] is what `serve` can call for a `verified` upstream.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde_json::Value;
use toolgate_core::display::{bounded, json_safe};
use toolgate_core::manifest::{
    MANIFEST_VERSION, Manifest, ManifestServer, compare_manifest, manifest_tool, parse_manifest, signing_payload,
};
use toolgate_store::format_rfc3339;

use crate::Outcome;
use crate::cli::{ManifestAction, ManifestArgs, ToolsArgs};
use crate::commands::prompt::assessed_tools;

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

/// A public key given as base64 text or as a file holding it.
fn read_public_key(text_or_path: &str) -> Result<VerifyingKey> {
    let text = if Path::new(text_or_path).is_file() {
        std::fs::read_to_string(text_or_path).with_context(|| format!("cannot read {text_or_path}"))?
    } else {
        text_or_path.to_owned()
    };
    let bytes =
        STANDARD.decode(text.trim()).map_err(|error| anyhow!("public key {text_or_path:?} is not base64: {error}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|bytes: Vec<u8>| anyhow!("public key {text_or_path:?} has {} bytes, not 32", bytes.len()))?;
    VerifyingKey::from_bytes(&bytes).map_err(|error| anyhow!("invalid public key {text_or_path:?}: {error}"))
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

/// What checking a manifest's signature found.
#[derive(Debug)]
pub(crate) enum SignatureCheck {
    /// Signed by one of the accepted keys.
    Valid(Manifest),
    /// Readable, but not validly signed by an accepted key; says why.
    Invalid(String),
}

/// Reads a manifest file and checks its signature against the accepted public keys (base64 text or files).
/// Errors are for unreadable input; a bad signature is [`SignatureCheck::Invalid`].
pub(crate) fn verify_manifest_file(path: &Path, accepted_keys: &[String]) -> Result<SignatureCheck> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read manifest {}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|error| anyhow!("{}:{}:{}: invalid JSON: {error}", path.display(), error.line(), error.column()))?;
    let manifest = parse_manifest(&value).with_context(|| format!("cannot read manifest {}", path.display()))?;
    let keys = accepted_keys.iter().map(|key| read_public_key(key)).collect::<Result<Vec<_>>>()?;
    // Compared as bytes, so another base64 spelling of the same key still matches.
    let signer = STANDARD.decode(manifest.public_key.trim()).unwrap_or_default();
    let Some(key) = keys.iter().find(|key| key.to_bytes().as_slice() == signer.as_slice()) else {
        return Ok(SignatureCheck::Invalid(format!("signed by {}, which is not an accepted key", manifest.public_key)));
    };
    let Some(signature_text) = &manifest.signature else {
        return Ok(SignatureCheck::Invalid("the manifest has no signature".to_owned()));
    };
    let Ok(signature_bytes) = STANDARD.decode(signature_text) else {
        return Ok(SignatureCheck::Invalid("the signature is not base64".to_owned()));
    };
    let Ok(signature) = Signature::from_slice(&signature_bytes) else {
        return Ok(SignatureCheck::Invalid(format!("the signature has {} bytes, not 64", signature_bytes.len())));
    };
    let payload = signing_payload(&value)?;
    Ok(match key.verify_strict(payload.as_bytes(), &signature) {
        Ok(()) => SignatureCheck::Valid(manifest),
        Err(_) => SignatureCheck::Invalid("the signature does not match the content (the manifest was changed)".into()),
    })
}

/// The tool fingerprints of a validly signed manifest, for an upstream whose trust is `verified`.
pub(crate) fn verified_fingerprints(path: &Path, accepted_keys: &[String]) -> Result<BTreeSet<String>> {
    match verify_manifest_file(path, accepted_keys)? {
        SignatureCheck::Valid(manifest) => Ok(manifest.tools.into_iter().map(|tool| tool.fingerprint).collect()),
        SignatureCheck::Invalid(reason) => bail!("manifest {}: {reason}", path.display()),
    }
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
