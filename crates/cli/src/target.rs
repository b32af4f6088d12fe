//! Getting the tools to look at: from a live server (stdio command, HTTP URL, or the bundled demo) or from a saved
//! `tools/list` result file.
//!
//! Every path ends in the same [`ToolSource`]; connection failures become errors that the binary turns into exit
//! code 2. The only command spawned without being named on the command line is toolgate itself (`demo-server`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolgate_upstream::{ConnectOptions, Connection, Endpoint, ListKind};

use crate::cli::TargetArgs;

/// The tools of one server, with what is known about the server.
#[derive(Debug, Clone)]
pub(crate) struct ToolSource {
    /// What the tools came from, for humans ("server-everything 2.0.0 via stdio", a file path).
    pub(crate) server: ServerDescription,
    /// The raw tool objects, in the server's order.
    pub(crate) tools: Vec<Value>,
    /// The file the tools were read from, when they came from a file.
    pub(crate) file: Option<PathBuf>,
}

/// Who served the tools.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ServerDescription {
    /// `serverInfo.name`, or the file name.
    pub(crate) name: String,
    /// `serverInfo.version`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    /// The negotiated protocol version, when connected.
    #[serde(rename = "protocolVersion", skip_serializing_if = "Option::is_none")]
    pub(crate) protocol_version: Option<String>,
    /// `stdio`, `http` or `file`.
    pub(crate) transport: &'static str,
}

/// Connects to the server the arguments name (else `configured`, the endpoint a config names, else the bundled
/// demo) and lists every tool.
pub(crate) async fn tools_from_server(args: &TargetArgs, configured: Option<&Endpoint>) -> Result<ToolSource> {
    let (endpoint, transport) = match configured {
        Some(endpoint) if args.url.is_none() && args.command.is_empty() => {
            let transport = if matches!(endpoint, Endpoint::Http { .. }) { "http" } else { "stdio" };
            (endpoint.clone(), transport)
        }
        _ => endpoint_for(args)?,
    };
    let options = ConnectOptions {
        name: endpoint.label(),
        initialize_timeout: Duration::from_secs(args.timeout),
        request_timeout: Duration::from_secs(args.timeout),
        max_message_bytes: args.max_message_mib.saturating_mul(1024 * 1024),
        ..ConnectOptions::default()
    };
    let connection = Connection::connect(&endpoint, options)
        .await
        .with_context(|| format!("cannot initialize an MCP session with {}", endpoint.label()))?;
    let listed = connection.list_all(ListKind::Tools).await;
    let outcome = connection.initialize_outcome().clone();
    connection.close().await;
    let tools = listed.with_context(|| format!("cannot list the tools of {}", endpoint.label()))?;
    let info = &outcome.server_info;
    Ok(ToolSource {
        server: ServerDescription {
            name: info.get("name").and_then(Value::as_str).unwrap_or("(unnamed server)").to_owned(),
            version: info.get("version").and_then(Value::as_str).map(str::to_owned),
            protocol_version: Some(outcome.protocol_version),
            transport,
        },
        tools,
        file: None,
    })
}

fn endpoint_for(args: &TargetArgs) -> Result<(Endpoint, &'static str)> {
    if let Some(url) = &args.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("--url must be an http:// or https:// URL, got {url:?}");
        }
        return Ok((Endpoint::http(url.clone()), "http"));
    }
    if let Some((program, rest)) = args.command.split_first() {
        return Ok((Endpoint::stdio(program.clone(), rest.iter().cloned()), "stdio"));
    }
    let own_binary = std::env::current_exe().context("cannot find the toolgate binary to run the demo server")?;
    Ok((Endpoint::stdio(own_binary.to_string_lossy().into_owned(), ["demo-server"]), "stdio"))
}

/// Reads a saved `tools/list` result: `{"tools": [...]}`, a whole JSON-RPC response, or a bare array.
pub(crate) fn tools_from_file(path: &Path) -> Result<ToolSource> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value = serde_json::from_str(&text).map_err(|error| {
        anyhow::anyhow!("{}:{}:{}: invalid JSON: {error}", path.display(), error.line(), error.column())
    })?;
    let tools = match value {
        Value::Array(tools) => tools,
        Value::Object(mut object) => {
            let mut holder = object.remove("result").unwrap_or(Value::Object(object));
            match holder.get_mut("tools").map(Value::take) {
                Some(Value::Array(tools)) => tools,
                _ => bail!("{}: expected a `tools` array (a tools/list result), found none", path.display()),
            }
        }
        _ => bail!("{}: expected a tools/list result object or an array of tools", path.display()),
    };
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(ToolSource {
        server: ServerDescription { name, version: None, protocol_version: None, transport: "file" },
        tools,
        file: Some(path.to_path_buf()),
    })
}
