//! An upstream's `trust`, `min_confidence`, `[upstream.manifest]` and `open_world_content`: how far its declared
//! hints are believed, and whether its prompts and resources count as content from outside.
//!
//! `untrusted` (the default) lets declarations only tighten unless inference agrees with at least
//! `min_confidence`; `pinned` and `verified` believe them. `verified` needs a manifest signed by one of the listed
//! Ed25519 keys, checked here only for shape (standard base64 of 32 bytes); the runtime reads and verifies the
//! manifest, this crate does not open it.

use toolgate_core::trust::{DEFAULT_MIN_CONFIDENCE, TrustLevel};
use toolgate_spec::{ManifestSpec, UpstreamTrust};

use crate::context::Context;
use crate::context::anchor;
use crate::raw::{RawManifest, RawUpstream};

/// The accepted `min_confidence` range.
const MIN_CONFIDENCE_RANGE: std::ops::RangeInclusive<f64> = 0.5..=1.0;

/// Length of an Ed25519 public key in bytes.
const ED25519_KEY_BYTES: usize = 32;

/// Lowers the trust keys of one upstream.
pub(crate) fn lower_trust(raw: &RawUpstream, label: &str, cx: &mut Context<'_>) -> UpstreamTrust {
    let level = raw.trust.as_ref().map_or(TrustLevel::Untrusted, |level| *level.get_ref());
    let min_confidence = match &raw.min_confidence {
        None => DEFAULT_MIN_CONFIDENCE,
        Some(value) => {
            let offset = value.span().start;
            let confidence = *value.get_ref();
            if !MIN_CONFIDENCE_RANGE.contains(&confidence) {
                cx.error(offset, format!("{label}: `min_confidence` must be between 0.5 and 1.0"));
            } else if level != TrustLevel::Untrusted {
                let message = format!(
                    "{label}: `min_confidence` only applies to trust = \"untrusted\"; this upstream is {}",
                    level.as_str()
                );
                cx.warn(offset, message);
            }
            // f32 holds every accepted value closely enough (0.5..=1.0 with a few decimals).
            confidence as f32
        }
    };
    let manifest = match (&raw.manifest, &raw.trust) {
        (Some(manifest), _) if level != TrustLevel::Verified => {
            let message = format!(
                "{label}: `[upstream.manifest]` needs trust = \"verified\" (this upstream is {})",
                level.as_str()
            );
            cx.error(manifest.span().start, message);
            None
        }
        (None, Some(trust)) if level == TrustLevel::Verified => {
            let message = format!(
                "{label}: trust = \"verified\" needs an `[upstream.manifest]` table with `path` and `public_keys`"
            );
            cx.error(trust.span().start, message);
            None
        }
        (Some(manifest), _) => lower_manifest(manifest.get_ref(), label, cx),
        (None, _) => None,
    };
    if let (Some(manifest), Some(trust)) = (&manifest, &raw.trust) {
        let keys = match manifest.public_keys.len() {
            1 => "the listed key".to_owned(),
            count => format!("any of the {count} listed keys"),
        };
        let message = format!(
            "{label}: trust = \"verified\": its declared hints are believed for the tools in {} when signed by {keys}; \
             check that the keys are the server author's",
            manifest.path.display()
        );
        cx.warn(trust.span().start, message);
    }
    let open_world_content = raw.open_world_content.as_ref().map(|value| *value.get_ref());
    UpstreamTrust { level, min_confidence, manifest, open_world_content, ..UpstreamTrust::default() }
}

fn lower_manifest(raw: &RawManifest, label: &str, cx: &mut Context<'_>) -> Option<ManifestSpec> {
    let before = cx.problem_count();
    let path = raw.path.get_ref();
    if path.is_empty() {
        cx.error(raw.path.span().start, format!("{label}: manifest `path` is empty"));
    } else if path.starts_with('~') {
        let message =
            format!("{label}: manifest `path` starts with `~`, which only a shell expands: write the full path");
        cx.error(raw.path.span().start, message);
    }
    let keys = raw.public_keys.get_ref();
    if keys.is_empty() {
        let message = format!("{label}: manifest `public_keys` is empty: list the Ed25519 keys that may sign it");
        cx.error(raw.public_keys.span().start, message);
    }
    let mut public_keys: Vec<String> = Vec::new();
    for key in keys {
        if !is_ed25519_public_key(key.get_ref()) {
            let message = format!(
                "{label}: public key \"{}\" is not an Ed25519 public key (standard base64 of 32 bytes, 44 characters \
                 ending in `=`)",
                key.get_ref()
            );
            cx.error(key.span().start, message);
        } else if public_keys.contains(key.get_ref()) {
            cx.error(key.span().start, format!("{label}: public key \"{}\" is listed twice", key.get_ref()));
        }
        public_keys.push(key.get_ref().clone());
    }
    if cx.problem_count() > before {
        return None;
    }
    Some(ManifestSpec { path: anchor(cx.base_dir, path), public_keys })
}

/// True for the padded standard base64 (RFC 4648 §4) encoding of exactly 32 bytes, in canonical form.
fn is_ed25519_public_key(text: &str) -> bool {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    // 32 bytes = 10 groups of 3 and 2 left over: 43 characters and one `=`.
    let encoded_len = ED25519_KEY_BYTES.div_ceil(3) * 4;
    let Some(body) = text.strip_suffix('=') else { return false };
    if text.len() != encoded_len || body.len() != encoded_len - 1 {
        return false;
    }
    let values: Option<Vec<usize>> =
        body.bytes().map(|byte| ALPHABET.iter().position(|candidate| *candidate == byte)).collect();
    // The last character carries 4 bits of data and 2 bits that must be zero in a canonical encoding.
    values.and_then(|values| values.last().copied()).is_some_and(|last| last & 0b11 == 0)
}

#[cfg(test)]
mod tests {
    use super::is_ed25519_public_key;

    #[test]
    fn ed25519_keys_are_44_characters_of_canonical_base64() {
        assert!(is_ed25519_public_key("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="));
        assert!(is_ed25519_public_key("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="));
        assert!(!is_ed25519_public_key("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo"));
        assert!(!is_ed25519_public_key("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURp="));
        assert!(!is_ed25519_public_key("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo="));
        assert!(!is_ed25519_public_key("AAAA"));
        assert!(!is_ed25519_public_key(""));
    }
}
