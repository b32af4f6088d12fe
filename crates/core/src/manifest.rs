//! Signed tool manifests, the pure part: what a manifest says, the exact bytes a signature covers, and how a
//! manifest compares with the tools a server lists now.
//!
//! A manifest is JSON (`version` 1):
//! `{"version", "server": {"name", "version"?}, "tools": [{"name", "fingerprint", "annotations"}], "signed_at",
//! "public_key", "signature"}`. `fingerprint` is the whole [`crate::fingerprint`] digest of the definition as the
//! server sends it (RFC 8785 + SHA-256), so any change to any field of a tool shows; `annotations` are the four
//! effective hint values the signer vouches for. The signature is Ed25519 over [`signing_payload`]: the RFC 8785
//! form of the whole manifest object without its `signature` member (unknown members included, so nothing can be
//! added unsigned). Keys and signatures are standard base64.
//!
//! No cryptography, clocks or files here (the core stays pure): the CLI signs and verifies, and passes the time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::effective::EffectiveHints;
use crate::fingerprint::{FingerprintError, canonical_json, fingerprint_tool};
use crate::hints::Hint;
use crate::tool::ToolDefinition;

/// The manifest format this module writes and reads.
pub const MANIFEST_VERSION: u32 = 1;

/// Why a manifest could not be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// A definition or the manifest could not be canonicalized.
    #[error(transparent)]
    Canonical(#[from] FingerprintError),
    /// The manifest is not a JSON object.
    #[error("a manifest must be a JSON object")]
    NotAnObject,
    /// The manifest does not have the expected shape.
    #[error("malformed manifest: {0}")]
    Malformed(String),
    /// The manifest has a version this toolgate does not know.
    #[error("unsupported manifest version {0} (this toolgate reads version {MANIFEST_VERSION})")]
    UnsupportedVersion(u64),
    /// Two tools of the manifest have the same name.
    #[error("the manifest lists tool {0:?} twice")]
    DuplicateTool(String),
}

/// Who served the tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestServer {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// One tool as the signer saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestTool {
    /// The tool's name at the server.
    pub name: String,
    /// `sha256:` of the RFC 8785 form of the whole definition.
    pub fingerprint: String,
    /// The effective values of the four hints, by wire key (`readOnlyHint`, ...).
    pub annotations: BTreeMap<String, bool>,
}

/// A manifest, signed or not yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// Who served the tools.
    pub server: ManifestServer,
    /// The tools, in the server's order.
    pub tools: Vec<ManifestTool>,
    /// When it was signed (RFC 3339, as the signer's clock said).
    pub signed_at: String,
    /// The signer's Ed25519 public key (base64); covered by the signature.
    pub public_key: String,
    /// Base64 Ed25519 signature over [`signing_payload`]; absent until signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The manifest entry of one tool: its whole fingerprint and its effective hint values.
pub fn manifest_tool(tool: &ToolDefinition, effective: &EffectiveHints) -> Result<ManifestTool, FingerprintError> {
    let annotations = Hint::ALL.iter().map(|hint| (hint.wire_key().to_owned(), effective.get(*hint).value)).collect();
    Ok(ManifestTool { name: tool.name().to_owned(), fingerprint: fingerprint_tool(tool)?.whole, annotations })
}

/// The text a signature covers: RFC 8785 JSON of the manifest object without its `signature` member.
pub fn signing_payload(manifest: &Value) -> Result<String, ManifestError> {
    let Value::Object(object) = manifest else {
        return Err(ManifestError::NotAnObject);
    };
    let unsigned: Map<String, Value> =
        object.iter().filter(|(key, _)| key.as_str() != "signature").map(|(k, v)| (k.clone(), v.clone())).collect();
    Ok(canonical_json(&Value::Object(unsigned))?)
}

/// Reads a manifest's fields (the signature is checked on the raw value, with [`signing_payload`]).
pub fn parse_manifest(value: &Value) -> Result<Manifest, ManifestError> {
    let Value::Object(object) = value else {
        return Err(ManifestError::NotAnObject);
    };
    if let Some(version) = object.get("version").and_then(Value::as_u64)
        && version != u64::from(MANIFEST_VERSION)
    {
        return Err(ManifestError::UnsupportedVersion(version));
    }
    let manifest: Manifest =
        serde_json::from_value(value.clone()).map_err(|error| ManifestError::Malformed(error.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    for tool in &manifest.tools {
        if !seen.insert(tool.name.as_str()) {
            return Err(ManifestError::DuplicateTool(tool.name.clone()));
        }
    }
    Ok(manifest)
}

/// How the tools a server lists now differ from a manifest. Names are in the order met.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ManifestComparison {
    /// Tools whose fingerprint matches.
    pub matching: Vec<String>,
    /// Listed now, absent from the manifest.
    pub added: Vec<String>,
    /// In the manifest, not listed now.
    pub removed: Vec<String>,
    /// Listed with a fingerprint other than the manifest's: `(name, manifest fingerprint, current fingerprint)`.
    pub changed: Vec<(String, String, String)>,
}

impl ManifestComparison {
    /// True when every tool matches and none was added or removed.
    pub fn is_exact(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares a manifest with the current tools, given as `(name, whole fingerprint)`.
pub fn compare_manifest(manifest: &Manifest, current: &[(String, String)]) -> ManifestComparison {
    let signed: BTreeMap<&str, &str> =
        manifest.tools.iter().map(|tool| (tool.name.as_str(), tool.fingerprint.as_str())).collect();
    let mut comparison = ManifestComparison::default();
    for (name, fingerprint) in current {
        match signed.get(name.as_str()) {
            None => comparison.added.push(name.clone()),
            Some(expected) if *expected == fingerprint => comparison.matching.push(name.clone()),
            Some(expected) => comparison.changed.push((name.clone(), (*expected).to_owned(), fingerprint.clone())),
        }
    }
    for tool in &manifest.tools {
        if !current.iter().any(|(name, _)| *name == tool.name) {
            comparison.removed.push(tool.name.clone());
        }
    }
    comparison
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assess_tool;
    use serde_json::json;

    fn sample() -> Manifest {
        let tool = ToolDefinition::from_value(json!({"name": "list_files", "annotations": {"readOnlyHint": true}}))
            .unwrap_or_else(|error| unreachable!("{error}"));
        let assessment = assess_tool(&tool, &Default::default());
        let entry = manifest_tool(&tool, &assessment.effective).unwrap_or_else(|error| unreachable!("{error}"));
        Manifest {
            version: MANIFEST_VERSION,
            server: ManifestServer { name: "demo".into(), version: Some("1.0".into()) },
            tools: vec![entry],
            signed_at: "2026-01-01T00:00:00.000000Z".into(),
            public_key: "AAAA".into(),
            signature: None,
        }
    }

    #[test]
    fn the_payload_ignores_the_signature_and_key_order() {
        let manifest = sample();
        let unsigned = serde_json::to_value(&manifest).unwrap_or_default();
        let mut signed = unsigned.clone();
        signed["signature"] = json!("c2ln");
        assert_eq!(signing_payload(&unsigned).ok(), signing_payload(&signed).ok());
        assert!(signing_payload(&unsigned).unwrap_or_default().starts_with(r#"{"public_key":"AAAA","server""#));
        let mut extra = signed.clone();
        extra["note"] = json!("unsigned addition");
        assert_ne!(signing_payload(&extra).ok(), signing_payload(&signed).ok());
    }

    #[test]
    fn annotations_are_effective_values() {
        let manifest = sample();
        let annotations = &manifest.tools[0].annotations;
        assert_eq!(annotations.get("readOnlyHint"), Some(&true));
        assert_eq!(annotations.get("destructiveHint"), Some(&false));
        assert_eq!(annotations.get("idempotentHint"), Some(&true));
    }

    #[test]
    fn parse_round_trips_and_rejects_other_versions() {
        let manifest = sample();
        let value = serde_json::to_value(&manifest).unwrap_or_default();
        assert_eq!(parse_manifest(&value), Ok(manifest));
        let mut newer = value.clone();
        newer["version"] = json!(2);
        assert_eq!(parse_manifest(&newer), Err(ManifestError::UnsupportedVersion(2)));
        let mut twice = value;
        let tool = twice["tools"][0].clone();
        if let Some(tools) = twice["tools"].as_array_mut() {
            tools.push(tool);
        }
        assert_eq!(parse_manifest(&twice), Err(ManifestError::DuplicateTool("list_files".into())));
    }

    #[test]
    fn comparison_names_added_removed_and_changed_tools() {
        let manifest = sample();
        let signed = manifest.tools[0].fingerprint.clone();
        let exact = compare_manifest(&manifest, &[("list_files".into(), signed.clone())]);
        assert!(exact.is_exact());
        let drifted =
            compare_manifest(&manifest, &[("list_files".into(), "sha256:other".into()), ("new".into(), signed)]);
        assert_eq!(drifted.added, vec!["new".to_owned()]);
        assert_eq!(drifted.changed.len(), 1);
        let gone = compare_manifest(&manifest, &[]);
        assert_eq!(gone.removed, vec!["list_files".to_owned()]);
    }
}
