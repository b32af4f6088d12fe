//! `toolgate import`: a Claude Desktop or VS Code MCP configuration turned into toolgate TOML text.
//!
//! The output starts with a comment saying where it came from and how to point the client at toolgate, then one
//! `[[upstream]]` per server (see [`server`]) and a listener suited to the client (stdio for Claude Desktop,
//! loopback HTTP for VS Code). It is text for a human to review, not a spec: nothing is run or resolved here,
//! and no environment variable is read. A VS Code `${input:...}` placeholder refuses the import (toolgate cannot
//! ask for it), and a literal secret copied into `env` or a header is marked with a warning.

mod jsonc;
mod model;
mod server;

use std::path::Path;

use crate::error::{ConfigError, Locator, Problem, invalid};
use crate::rules::{sanitize_name, toml_string};
use model::{ClientFile, InputEntry, OrderedMap, ServerEntry};
use server::translate_server;
use toolgate_spec::{DEFAULT_BIND, DEFAULT_HTTP_PATH};

/// The client whose file is imported, which decides the listener and the instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    ClaudeDesktop,
    VsCode,
}

/// Converts the text of a client configuration file at `origin` into toolgate TOML.
pub(crate) fn import_text(text: &str, origin: &Path) -> Result<String, ConfigError> {
    let json = jsonc::strip_jsonc(text);
    let file: ClientFile = serde_json::from_str(&json).map_err(|error| json_error(origin, &error))?;
    let (client, servers, inputs) = match file {
        ClientFile { mcp_servers: Some(servers), .. } => (Client::ClaudeDesktop, servers, Vec::new()),
        ClientFile { servers: Some(servers), inputs, .. } => (Client::VsCode, servers, inputs.unwrap_or_default()),
        ClientFile { mcp: Some(model::NestedMcp { servers: Some(servers), inputs }), .. } => {
            (Client::VsCode, servers, inputs.unwrap_or_default())
        }
        _ => {
            let message = "no `mcpServers` (Claude Desktop) or `servers` (VS Code mcp.json) object in this file";
            return Err(invalid(vec![Locator::new(origin, text).problem(0, message)]));
        }
    };
    let blocks = translate_servers(servers, &inputs);
    // A VS Code input is asked of a person when VS Code starts the server; toolgate cannot ask, and a file carrying
    // the placeholder would start the server with `${input:...}` as the value: refused, naming each one.
    let locator = Locator::new(origin, text);
    let unresolved: Vec<Problem> = blocks
        .iter()
        .filter(|block| block.active)
        .flat_map(|block| block.unresolved_inputs.iter().map(move |placeholder| (block, placeholder)))
        .map(|(block, placeholder)| {
            let server = block.lines.get(1).map(String::as_str).unwrap_or_default();
            locator.problem(
                text.find(placeholder.as_str()).unwrap_or(0),
                format!(
                    "server ({server}): `{placeholder}` is a VS Code input toolgate cannot ask for; put the value in \
                     the source file (a secret in an environment variable: `${{env:NAME}}`) and import again"
                ),
            )
        })
        .collect();
    if !unresolved.is_empty() {
        return Err(invalid(unresolved));
    }
    if !blocks.iter().any(|block| block.active) {
        let message = if blocks.is_empty() {
            "the file lists no servers: nothing to import".to_owned()
        } else {
            format!(
                "none of the {} servers can run behind toolgate (legacy SSE, disabled or incomplete): nothing to import",
                blocks.len()
            )
        };
        return Err(invalid(vec![Locator::new(origin, text).problem(0, message)]));
    }
    let mut output = header(client, origin);
    for block in &blocks {
        output.push('\n');
        output.push_str(&block.render());
    }
    output.push('\n');
    output.push_str(&listener(client));
    Ok(output)
}

fn json_error(origin: &Path, error: &serde_json::Error) -> ConfigError {
    let message = format!("invalid JSON: {}", strip_position(&error.to_string()));
    invalid(vec![Problem {
        file: origin.to_path_buf(),
        line: error.line().max(1),
        column: error.column().max(1),
        message,
    }])
}

/// serde_json appends " at line L column C"; the position is already in front of the message.
fn strip_position(message: &str) -> &str {
    message.rfind(" at line ").map_or(message, |index| &message[..index])
}

fn translate_servers(servers: OrderedMap<ServerEntry>, inputs: &[InputEntry]) -> Vec<server::Block> {
    let mut used: Vec<String> = Vec::new();
    let mut blocks = Vec::new();
    for (original, entry) in servers.0 {
        let base = sanitize_name(&original);
        let mut name = base.clone();
        let mut suffix = 2;
        while used.iter().any(|taken| taken.eq_ignore_ascii_case(&name)) {
            let tail = format!("-{suffix}");
            name = format!("{}{tail}", base.chars().take(32 - tail.len()).collect::<String>());
            suffix += 1;
        }
        used.push(name.clone());
        let mut block = translate_server(&name, entry, inputs);
        if name != original {
            block.notes.insert(0, format!("named {} in the source file", toml_string(&original)));
        }
        blocks.push(block);
    }
    blocks
}

fn header(client: Client, origin: &Path) -> String {
    let source = origin.display();
    let instructions = match client {
        Client::ClaudeDesktop => format!(
            "# toolgate configuration imported from {source} (Claude Desktop format) by `toolgate import`.\n\
             #\n\
             # Review it, check it with `toolgate check-config gateway.toml`, then point Claude Desktop at toolgate\n\
             # instead of the servers themselves: in claude_desktop_config.json, replace \"mcpServers\" with\n\
             #   \"mcpServers\": {{\"toolgate\": {{\"command\": \"toolgate\", \"args\": [\"serve\", \"--config\", \"/absolute/path/to/gateway.toml\"]}}}}\n\
             # toolgate then starts the servers below (only these commands) and relays their tools on stdio.\n"
        ),
        Client::VsCode => format!(
            "# toolgate configuration imported from {source} (VS Code format) by `toolgate import`.\n\
             #\n\
             # Review it, check it with `toolgate check-config gateway.toml`, start `toolgate serve --config gateway.toml`,\n\
             # then point VS Code at toolgate instead of the servers themselves: in mcp.json, replace \"servers\" with\n\
             #   \"servers\": {{\"toolgate\": {{\"type\": \"http\", \"url\": \"http://{DEFAULT_BIND}{DEFAULT_HTTP_PATH}\"}}}}\n"
        ),
    };
    format!("{instructions}# The format is described in docs/config.md.\n")
}

fn listener(client: Client) -> String {
    match client {
        Client::ClaudeDesktop => "# Claude Desktop starts toolgate and talks to it on stdin/stdout.\n\
                                  [listen.stdio]\n\
                                  identity = \"claude-desktop\"\n"
            .to_owned(),
        Client::VsCode => format!(
            "# VS Code connects over Streamable HTTP on this machine only.\n\
             [listen.http]\n\
             bind = \"{DEFAULT_BIND}\"\n\
             path = \"{DEFAULT_HTTP_PATH}\"\n"
        ),
    }
}
