//! Verification records as evidence: the one place that reads, from the state store, the records `toolgate verify`
//! stored for a stdio upstream's command and puts them in its trust (`UpstreamTrust::observations`). `serve` (at
//! start and on SIGHUP) and the views (`inspect`, `lint`, `prompt`) all call it, so the relay, the console and the
//! views weigh the same records and name the same one.
//!
//! A record matches an upstream by its command: the program as the spawn finds it (looked up on the `PATH` the
//! upstream is started with when it names no path, made absolute when it does), then the arguments exactly. `verify`
//! stores the command spelled the same way ([`command_key`]). This module only reads records; it never writes one,
//! and a view never creates a state store that is not there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use toolgate_spec::{Endpoint, UpstreamSpec};
use toolgate_store::Store;

use crate::store_location::StoreLocation;

/// The command a record is stored under and matched by: `program` resolved as the spawn resolves it, then `args`.
/// `path` is the `PATH` the program is looked up on (the upstream's own when its config sets one), `cwd` the
/// directory a relative path is taken from.
pub(crate) fn command_key(program: &str, args: &[String], path: Option<&OsStr>, cwd: Option<&Path>) -> Vec<String> {
    std::iter::once(resolve_program(program, path, cwd)).chain(args.iter().cloned()).collect()
}

/// `program` as an absolute path when it can be found, else as given (a record then matches only the same spelling).
fn resolve_program(program: &str, path: Option<&OsStr>, cwd: Option<&Path>) -> String {
    if program.is_empty() {
        return String::new();
    }
    // As `execvp`: a name with a slash is a path, never looked up.
    if program.contains('/') {
        let given = Path::new(program);
        let absolute = match cwd {
            Some(dir) if given.is_relative() => dir.join(given),
            _ => std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf()),
        };
        return absolute.to_string_lossy().into_owned();
    }
    let inherited = std::env::var_os("PATH");
    let Some(search) = path.or(inherited.as_deref()) else { return program.to_owned() };
    std::env::split_paths(search)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .and_then(|found| std::path::absolute(&found).ok())
        .map_or_else(|| program.to_owned(), |found: PathBuf| found.to_string_lossy().into_owned())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The command key of a stdio endpoint; `None` for HTTP (no command, no records).
fn endpoint_key(endpoint: &Endpoint) -> Option<(Vec<String>, Vec<String>)> {
    let Endpoint::Stdio { program, args, env, cwd } = endpoint else { return None };
    let path = env.iter().rev().find(|(key, _)| key == "PATH").map(|(_, value)| OsStr::new(value.as_str()));
    let resolved = command_key(program, args, path, cwd.as_deref());
    // Records stored before commands were resolved carry the command as it was typed.
    let typed: Vec<String> = std::iter::once(program.clone()).chain(args.iter().cloned()).collect();
    Some((resolved, typed))
}

/// Gives a stdio upstream the newest record per tool fingerprint stored for its command, as evidence for the trust
/// rule; an HTTP upstream has none.
pub(crate) async fn load_observations(upstream: &mut UpstreamSpec, store: &Store) -> Result<()> {
    let Some((resolved, typed)) = endpoint_key(&upstream.endpoint) else { return Ok(()) };
    let mut records = Vec::new();
    for command in std::iter::once(&resolved).chain((typed != resolved).then_some(&typed)) {
        records.extend(
            store
                .verifications_for(command)
                .await
                .with_context(|| format!("cannot read the verification records of upstream `{}`", upstream.name))?,
        );
    }
    // Oldest first, so the newest record of a fingerprint (under either spelling) is the one kept.
    records.sort_by_key(|record| record.id);
    for record in records {
        let facts = record.facts;
        let observation = toolgate_core::trust::Observation {
            record: record.name(),
            wrote: facts.wrote,
            connected: facts.connected,
            repeat_changed: facts.repeat_changed,
            destroyed: facts.destroyed,
            supported: facts.supported,
        };
        upstream.trust.observations.insert(record.fingerprint, observation);
    }
    Ok(())
}

/// What a view does: the records in the store at `location` (the state directory's, or the PostgreSQL database its
/// config names) for `upstream`, read without writing anything; no SQLite store there means no records.
pub(crate) async fn load_for_view(upstream: &mut UpstreamSpec, location: &StoreLocation) -> Result<()> {
    if endpoint_key(&upstream.endpoint).is_none() {
        return Ok(());
    }
    if location.postgres().is_none() && !location.database().exists() {
        return Ok(());
    }
    let store = location.open_read_only().await.context("cannot read the verification records")?;
    let loaded = load_observations(upstream, &store).await;
    store.close().await.context("cannot close the state store")?;
    loaded
}
