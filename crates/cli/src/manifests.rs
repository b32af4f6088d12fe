//! Signed manifests as a trust input: reading a manifest file, checking its Ed25519 signature against the keys the
//! operator accepted, and giving each `verified` upstream the fingerprints it signed. `serve`, its reload, the
//! views and `toolgate manifest verify` share it; it reads files and keys and writes nothing.
//!
//! Verification uses `verify_strict` (no malleable signatures) and accepts a manifest only when its embedded
//! `public_key` is one of the keys the person named, so a manifest cannot bring its own signer.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use serde_json::Value;
use toolgate_core::manifest::{Manifest, parse_manifest, signing_payload};
use toolgate_spec::GatewaySpec;

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

/// Checks the signed manifest of every `verified` upstream once, at start; the gateway then trusts a verified
/// upstream's tool only when its fingerprint is in the manifest. A manifest that does not verify stops the start:
/// the operator asked for verification, so running without it would be a silent downgrade.
pub(crate) fn verify_manifests(spec: &mut GatewaySpec) -> Result<()> {
    for upstream in &mut spec.upstreams {
        if let Some(manifest) = &upstream.trust.manifest {
            let fingerprints = verified_fingerprints(&manifest.path, &manifest.public_keys).with_context(|| {
                format!("upstream `{}` is `verified`, but its manifest does not verify", upstream.name)
            })?;
            tracing::info!(upstream = %upstream.name, tools = fingerprints.len(), "signed manifest verified");
            upstream.trust.verified_fingerprints = Some(fingerprints);
        }
    }
    Ok(())
}
