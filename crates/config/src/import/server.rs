//! One client server entry translated into one `[[upstream]]` block of toolgate TOML, with notes.
//!
//! What cannot be carried over faithfully is said in a comment right above the block: placeholders toolgate does
//! not expand, ignored keys, a split shell-style command. What cannot run behind toolgate (legacy SSE, unknown
//! transports, invalid entries, disabled servers) is emitted commented out, so nothing is lost and nothing
//! unexpected runs. Only values that pass toolgate's own rules are emitted active.

use crate::import::model::{InputEntry, ServerEntry};
use crate::rules::{self, toml_key, toml_string};
use std::path::Path;

/// A translated server: comment notes, TOML lines, and whether the lines are active or commented out.
#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) notes: Vec<String>,
    pub(crate) lines: Vec<String>,
    pub(crate) active: bool,
    /// Every `${input:...}` placeholder the server's settings hold: VS Code asks a person for these, toolgate
    /// cannot, and a config carrying one would start the server with the placeholder text as the value. The import
    /// is refused while any remains (`import::import_text`).
    pub(crate) unresolved_inputs: Vec<String>,
}

impl Block {
    /// The block as TOML text (notes as comments; inactive lines commented out).
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        for note in &self.notes {
            for line in wrap(note, NOTE_WIDTH) {
                text.push_str(&format!("# {line}\n"));
            }
        }
        for line in &self.lines {
            if self.active {
                text.push_str(&format!("{line}\n"));
            } else {
                text.push_str(&format!("# {line}\n"));
            }
        }
        text
    }
}

/// Longest comment line written for a note (the `# ` not counted).
const NOTE_WIDTH: usize = 110;

/// `text` split at spaces into lines of at most `width` characters (a longer word stays whole).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str("  ");
        } else if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// Translates `entry`, exposed under the already sanitized and unique `name`.
pub(crate) fn translate_server(name: &str, entry: ServerEntry, inputs: &[InputEntry]) -> Block {
    let mut block = Block {
        notes: Vec::new(),
        lines: vec!["[[upstream]]".to_owned(), format!("name = {}", toml_string(name))],
        active: true,
        unresolved_inputs: Vec::new(),
    };
    for key in entry.other.keys() {
        block.notes.push(match key.as_str() {
            "envFile" => "ignored `envFile`: toolgate reads no env files; copy the variables into `env`".to_owned(),
            other => format!("ignored `{other}`: toolgate has no such setting"),
        });
    }
    if entry.disabled == Some(true) {
        block.notes.push("disabled in the source file: left commented out".to_owned());
        block.active = false;
    }
    let transport = entry.transport.as_deref().map(str::to_ascii_lowercase);
    let stdio = match transport.as_deref() {
        Some("stdio") => true,
        Some("http" | "streamable-http" | "streamablehttp" | "streamable_http") => false,
        Some("sse") => {
            block.notes.push(
                "legacy HTTP+SSE server: toolgate speaks Streamable HTTP only. If the server also serves Streamable \
                 HTTP (often at /mcp instead of /sse), fix the url and uncomment"
                    .to_owned(),
            );
            block.active = false;
            false
        }
        Some(other) => {
            block.notes.push(format!("unknown transport type \"{other}\": left commented out"));
            block.active = false;
            entry.url.is_none()
        }
        None if entry.command.is_some() && entry.url.is_some() => {
            block.notes.push("has both `command` and `url` and no `type`: left commented out; keep one".to_owned());
            block.active = false;
            true
        }
        None => entry.url.is_none(),
    };
    if stdio {
        translate_stdio(entry, inputs, &mut block);
    } else {
        translate_http(entry, inputs, &mut block);
    }
    block
}

fn translate_stdio(entry: ServerEntry, inputs: &[InputEntry], block: &mut Block) {
    let Some(command) = entry.command.filter(|command| !command.trim().is_empty()) else {
        block.notes.push("no `command`: left commented out".to_owned());
        block.active = false;
        return;
    };
    if entry.url.is_some() || entry.headers.is_some() {
        block.notes.push("ignored `url` and `headers`: this is a stdio server".to_owned());
    }
    let mut args = entry.args.unwrap_or_default();
    let mut command = command;
    if args.is_empty() && command.trim().contains(char::is_whitespace) {
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words.next().unwrap_or_default();
        args = words.collect();
        block
            .notes
            .push(format!("split `command` {} into command and args: toolgate runs no shell", toml_string(&command)));
        command = program;
    }
    for value in std::iter::once(&command).chain(&args).chain(&entry.cwd) {
        warn_placeholders(value, inputs, block);
    }
    if command.starts_with('~') || entry.cwd.as_deref().is_some_and(|cwd| cwd.starts_with('~')) {
        block.notes.push("`~` is only expanded by a shell: write the full path and uncomment".to_owned());
        block.active = false;
    }
    block.lines.push(format!("command = {}", toml_string(&command)));
    let quoted: Vec<String> = args.iter().map(|arg| toml_string(arg)).collect();
    block.lines.push(format!("args = [{}]", quoted.join(", ")));
    if let Some(cwd) = &entry.cwd {
        block.lines.push(format!("cwd = {}", toml_string(cwd)));
    }
    let mut env = Vec::new();
    let mut pass_env: Vec<String> =
        toolgate_spec::DEFAULT_SANDBOX_PASS_ENV.iter().map(|name| (*name).to_owned()).collect();
    for (key, value) in entry.env.map(|env| env.0).unwrap_or_default() {
        let Some(value) = value else { continue };
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            block.notes.push(format!("dropped env {}: not a valid environment variable", toml_string(&key)));
        } else if value == format!("${{env:{key}}}") {
            block
                .notes
                .push(format!("env `{key}` is passed through from toolgate's own environment (sandbox.pass_env)"));
            if crate::rules::check_env_var_name(&key).is_ok() && !pass_env.contains(&key) {
                pass_env.push(key);
            }
        } else {
            warn_placeholders(&value, inputs, block);
            if looks_secret(&key) && !value.contains("${") && !value.trim().is_empty() {
                block.notes.push(format!(
                    "warning: env `{key}` is a literal secret copied into this file: set it in toolgate's own \
                     environment instead (the server inherits it) and remove it here"
                ));
            }
            env.push(format!("{} = {}", toml_key(&key), toml_string(&value)));
        }
    }
    if !env.is_empty() {
        block.lines.push(format!("env = {{ {} }}", env.join(", ")));
    }
    // Explicit settings, so the file says what runs: auto follows the tools' hints; nothing is writable until a
    // person lists the paths the server's write tools need (docs/sandbox.md).
    let passed: Vec<String> = pass_env.iter().map(|name| toml_string(name)).collect();
    block.lines.push(format!("sandbox = {{ mode = \"auto\", writable = [], pass_env = [{}] }}", passed.join(", ")));
    if block.active {
        block.notes.push("sandboxed: list the paths its write tools need in sandbox.writable".to_owned());
        let launcher = Path::new(&command).file_name().and_then(|name| name.to_str()).unwrap_or_default();
        if ["npx", "uvx", "bunx", "pipx"].contains(&launcher) {
            block.notes.push(format!(
                "`{launcher}` downloads the server at start, which a sandbox without the network or a writable cache \
                 refuses: install the server and point `command` at it"
            ));
        }
    }
}

fn translate_http(entry: ServerEntry, inputs: &[InputEntry], block: &mut Block) {
    let Some(url) = entry.url else {
        block.notes.push("no `url`: left commented out".to_owned());
        block.active = false;
        return;
    };
    if entry.command.is_some() || entry.args.is_some() || entry.env.is_some() || entry.cwd.is_some() {
        block.notes.push("ignored `command`, `args`, `env` and `cwd`: this is an HTTP server".to_owned());
    }
    warn_placeholders(&url, inputs, block);
    if let Err(message) = rules::check_url(&url) {
        block.notes.push(format!("{message}: left commented out"));
        block.active = false;
    }
    block.lines.push(format!("url = {}", toml_string(&url)));
    let mut headers = Vec::new();
    let mut bearer_token_env = None;
    for (name, value) in entry.headers.map(|headers| headers.0).unwrap_or_default() {
        if let Err(message) = rules::check_header_name(&name) {
            block.notes.push(format!("dropped header: {message}"));
            continue;
        }
        if !rules::is_header_value(&value) {
            block.notes.push(format!("dropped header `{name}`: its value has characters not allowed in HTTP headers"));
            continue;
        }
        if name.eq_ignore_ascii_case("authorization") {
            if let Some(variable) = bearer_env_variable(&value) {
                block.notes.push(format!("`Authorization: Bearer ${{env:{variable}}}` became bearer_token_env"));
                bearer_token_env = Some(variable);
                continue;
            }
            if !value.contains("${") {
                block.notes.push(
                    "the Authorization header holds a literal credential: consider bearer_token_env instead".to_owned(),
                );
            }
        }
        if !name.eq_ignore_ascii_case("authorization") && looks_secret(&name) && !value.contains("${") {
            block.notes.push(format!(
                "warning: header `{name}` is a literal secret copied into this file: keep credentials out of it \
                 (for a bearer token, bearer_token_env)"
            ));
        }
        warn_placeholders(&value, inputs, block);
        headers.push(format!("{} = {}", toml_key(&name), toml_string(&value)));
    }
    if !headers.is_empty() {
        block.lines.push(format!("headers = {{ {} }}", headers.join(", ")));
    }
    if let Some(variable) = bearer_token_env {
        block.lines.push(format!("bearer_token_env = {}", toml_string(&variable)));
    }
}

/// Whether an environment variable or header name says it holds a credential (`GITHUB_TOKEN`, `X-Api-Key`, ...).
fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "API-KEY", "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL"]
        .iter()
        .any(|word| upper.contains(word))
}

/// `VAR` from `Bearer ${env:VAR}` (any case of "Bearer", surrounding spaces allowed).
fn bearer_env_variable(value: &str) -> Option<String> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(char::is_whitespace)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let variable = rest.trim().strip_prefix("${env:")?.strip_suffix('}')?;
    rules::check_env_var_name(variable).ok()?;
    Some(variable.to_owned())
}

/// Adds a warning for every `${...}` placeholder in `value`: toolgate expands none of them.
fn warn_placeholders(value: &str, inputs: &[InputEntry], block: &mut Block) {
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(length) = rest[start..].find('}') else { break };
        let placeholder = &rest[start..start + length + 1];
        let inner = &placeholder[2..placeholder.len() - 1];
        let warning = if let Some(id) = inner.strip_prefix("input:") {
            if !block.unresolved_inputs.iter().any(|seen| seen == placeholder) {
                block.unresolved_inputs.push(placeholder.to_owned());
            }
            let described = inputs
                .iter()
                .find(|input| input.id.as_deref() == Some(id))
                .and_then(|input| input.description.as_deref())
                .map(|description| format!(" ({description})"))
                .unwrap_or_default();
            format!(
                "warning: `{placeholder}`{described} is a VS Code input toolgate cannot prompt for: replace it with \
                 the value (for a bearer token, use bearer_token_env)"
            )
        } else if let Some(variable) = inner.strip_prefix("env:") {
            format!("warning: `{placeholder}` is not expanded by toolgate: write the value of ${variable} here")
        } else {
            format!("warning: `{placeholder}` is a client variable toolgate does not expand: replace it")
        };
        if !block.notes.contains(&warning) {
            block.notes.push(warning);
        }
        rest = &rest[start + length + 1..];
    }
}
