//! A real OpenID provider for the OAuth tests: npm `oidc-provider` 9.x (installed in the peers) run with the peers'
//! Node 22 by `fixtures/oidc_provider.mjs`, configured by a [`ProviderConfig`] the test builds.
//!
//! - [`ProviderConfig`] names the signing keys (always given by the test, from [`generate_keys`]), scopes, clients
//!   (a client-credentials service, a public console client with authorization code + PKCE, or any raw
//!   `oidc-provider` client metadata), RFC 8707 resource servers issuing JWT (or opaque) access tokens with a TTL,
//!   and a fixed set of accounts (subject, name, email, groups) that logins may name.
//! - [`OidcProvider::start`] spawns it on a loopback port chosen by the system (or [`OidcProvider::start_on`] a given
//!   one), waits until `/.well-known/openid-configuration` answers, and kills it on drop. [`OidcProvider::stop`]
//!   takes it down (the "provider unreachable" tests) and [`OidcProvider::restart`] brings it back on the same port,
//!   same issuer, possibly with a new key set (key rotation while toolgate serves).
//! - [`OidcProvider::client_credentials`] / [`OidcProvider::service_token`] get a token, and
//!   [`OidcProvider::token_exchange`] trades one for another resource's (RFC 8693, the script's own grant, for a
//!   [`ProviderConfig::exchange_client`]); [`OidcProvider::revoke`] revokes one (RFC 7009); [`sign_jwt`] signs
//!   any header and payload with a JWK, an HMAC secret or `alg: none`, for tokens the provider would never issue.
//!
//! Node 22 or the package missing is a test failure with the install command, never a skip. This module talks plain
//! HTTP/1.1 to loopback only; it must never reach the network or be used by shipped code.
//!
//! ```no_run
//! use toolgate_test_support::oidc::{OidcProvider, ProviderConfig, generate_keys};
//! let resource = "http://127.0.0.1:8080/mcp";
//! let config = ProviderConfig::new(generate_keys(&["RS256"]))
//!     .scopes(&["tools:call"])
//!     .service_client("svc", "svc-secret", "tools:call")
//!     .resource(resource, "tools:call", 300);
//! let provider = OidcProvider::start(&config);
//! let token = provider.service_token("svc", "svc-secret", "tools:call", resource);
//! # let _ = token;
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Peers, fixtures_dir, run_guarded};

/// The RFC 8693 grant type the script registers.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The RFC 8693 token type of an access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// How long the provider may take to start and answer discovery (Node under a loaded machine is slow).
const START_GUARD: Duration = Duration::from_secs(60);

/// The provider's configuration, as the JSON `oidc_provider.mjs serve` reads (its header documents each field).
/// Builder methods cover the common shapes; [`ProviderConfig::set`] and [`ProviderConfig::client`] take raw JSON
/// for anything else (more grant types, features), so an extension needs no new method here.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    json: Value,
}

impl ProviderConfig {
    /// A provider signing with `keys` (a private JWKS from [`generate_keys`]), with no clients yet.
    pub fn new(keys: Value) -> Self {
        ProviderConfig {
            json: json!({
                "keys": keys,
                "scopes": [],
                "clients": [],
                "resources": [],
                "accounts": [],
                "ttl": {},
            }),
        }
    }

    /// Scope names the provider accepts besides `openid`, `offline_access`, `profile` and `email`.
    pub fn scopes(mut self, scopes: &[&str]) -> Self {
        self.json["scopes"] = json!(scopes);
        self
    }

    /// A confidential service client allowed only the client-credentials grant (`client_secret_basic`), with the
    /// space-separated `scope` it may ask for.
    pub fn service_client(self, client_id: &str, secret: &str, scope: &str) -> Self {
        self.client(json!({
            "client_id": client_id,
            "client_secret": secret,
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": scope,
        }))
    }

    /// A confidential client (`client_secret_basic`) allowed client credentials and RFC 8693 token exchange (the
    /// gateway acting on behalf of its callers), with the space-separated `scope` it may ask for.
    pub fn exchange_client(self, client_id: &str, secret: &str, scope: &str) -> Self {
        self.client(json!({
            "client_id": client_id,
            "client_secret": secret,
            "grant_types": ["client_credentials", TOKEN_EXCHANGE],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": scope,
        }))
    }

    /// A public console client: authorization code with PKCE (S256, required for public clients), no secret, one
    /// redirect URI, the `scope` it may ask for (add `openid profile email groups` for an ID token with them).
    pub fn console_client(self, client_id: &str, redirect_uri: &str, scope: &str) -> Self {
        self.client(json!({
            "client_id": client_id,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "scope": scope,
        }))
    }

    /// Any client, as `oidc-provider` client metadata (verbatim).
    pub fn client(mut self, metadata: Value) -> Self {
        self.push("clients", metadata);
        self
    }

    /// An RFC 8707 resource server: tokens requested with `resource=indicator` are JWTs with `aud = indicator`,
    /// signed with the first key's algorithm, limited to `scope`, valid `ttl_seconds`.
    pub fn resource(self, indicator: &str, scope: &str, ttl_seconds: u64) -> Self {
        self.resource_with(json!({ "indicator": indicator, "scope": scope, "ttl": ttl_seconds }))
    }

    /// A resource server with any of the script's fields (`format: "opaque"` for introspection tests, `alg`,
    /// `audience`).
    pub fn resource_with(mut self, resource: Value) -> Self {
        self.push("resources", resource);
        self
    }

    /// The resource used when a token request names none.
    pub fn default_resource(self, indicator: &str) -> Self {
        self.set("default_resource", json!(indicator))
    }

    /// An account a login may name (the provider's development login accepts any password), whose `name`,
    /// `email` and `groups` also go into its JWT access tokens.
    pub fn account(mut self, sub: &str, name: &str, email: &str, groups: &[&str]) -> Self {
        self.push("accounts", json!({ "sub": sub, "name": name, "email": email, "groups": groups }));
        self
    }

    /// The lifetime in seconds of one artifact kind (`AccessToken`, `ClientCredentials`, `Session`, ...).
    pub fn ttl(mut self, artifact: &str, seconds: u64) -> Self {
        self.json["ttl"][artifact] = json!(seconds);
        self
    }

    /// Replaces the signing keys (for a restart that rotates them).
    pub fn keys(self, keys: Value) -> Self {
        self.set("keys", keys)
    }

    /// Sets any top-level field of the script's configuration.
    pub fn set(mut self, field: &str, value: Value) -> Self {
        self.json[field] = value;
        self
    }

    /// The configuration as the script reads it.
    pub fn json(&self) -> &Value {
        &self.json
    }

    fn push(&mut self, field: &str, value: Value) {
        match self.json[field].as_array_mut() {
            Some(items) => items.push(value),
            None => self.json[field] = json!([value]),
        }
    }
}

/// A running provider; killed on drop.
#[derive(Debug)]
pub struct OidcProvider {
    child: Option<Child>,
    port: u16,
    issuer: String,
    // Holds the configuration file for the provider's lifetime.
    _dir: tempfile::TempDir,
}

impl OidcProvider {
    /// Starts the provider on a port the system chooses and waits until discovery answers.
    pub fn start(config: &ProviderConfig) -> OidcProvider {
        Self::start_on(0, config)
    }

    /// Starts it on `port` (0: chosen by the system). Panics with the provider's stderr when it does not come up.
    pub fn start_on(port: u16, config: &ProviderConfig) -> OidcProvider {
        let dir = tempfile::tempdir().expect("a temporary directory for the provider's configuration");
        let path = dir.path().join("provider.json");
        let mut json = config.json.clone();
        json["port"] = json!(port);
        std::fs::write(&path, serde_json::to_vec(&json).expect("configuration serializes"))
            .expect("the provider's configuration is writable");
        let mut child = node_command()
            .arg("serve")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("the OpenID provider (Node 22) does not start: {error}"));
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, announced) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = sender.send(line);
            // oidc-provider prints notices on stdout later (the first interaction's, say): keep reading, or the
            // closed pipe kills the provider with EPIPE in the middle of a login.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let (err_sender, err_text) = channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            let _ = err_sender.send(text);
        });
        let line = match announced.recv_timeout(START_GUARD) {
            Ok(line) if !line.trim().is_empty() => line,
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = err_text.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
                panic!("the OpenID provider did not announce its port (port {port} taken?); its stderr:\n{stderr}");
            }
        };
        let announced: Value = serde_json::from_str(line.trim())
            .unwrap_or_else(|error| panic!("the provider announced {line:?}, not JSON: {error}"));
        let port = announced["port"].as_u64().and_then(|p| u16::try_from(p).ok()).expect("the provider names a port");
        let issuer = announced["issuer"].as_str().expect("the provider names its issuer").to_string();
        let provider = OidcProvider { child: Some(child), port, issuer, _dir: dir };
        let started = Instant::now();
        loop {
            if matches!(provider.get("/.well-known/openid-configuration"), Ok((200, _))) {
                return provider;
            }
            assert!(started.elapsed() < START_GUARD, "the provider on port {port} never answered discovery");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The issuer, `http://127.0.0.1:PORT` (no trailing slash).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the provider (it stays down until [`OidcProvider::restart`]).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops it if running and starts it again on the same port (same issuer) with `config`, e.g. new keys.
    pub fn restart(&mut self, config: &ProviderConfig) {
        self.stop();
        let started = Instant::now();
        // The port was just released; retry briefly in case the kernel has not let go of it yet.
        let fresh = loop {
            let attempt = std::panic::catch_unwind(|| Self::start_on(self.port, config));
            match attempt {
                Ok(fresh) => break fresh,
                Err(panic) if started.elapsed() > START_GUARD => std::panic::resume_unwind(panic),
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        *self = fresh;
    }

    /// Asks the token endpoint for a client-credentials token. `resource` is the RFC 8707 indicator (`None` for
    /// none). Returns the HTTP status and the JSON body (a token response or an OAuth error).
    pub fn client_credentials(
        &self,
        client_id: &str,
        secret: &str,
        scope: &str,
        resource: Option<&str>,
    ) -> (u16, Value) {
        let mut form = vec![("grant_type", "client_credentials"), ("scope", scope)];
        if let Some(resource) = resource {
            form.push(("resource", resource));
        }
        let body = form_encode(&form);
        let basic = base64_encode(format!("{}:{}", form_encode_value(client_id), form_encode_value(secret)).as_bytes());
        let (status, text) = self
            .request("POST", "/token", &[("Authorization", &format!("Basic {basic}"))], Some(&body))
            .unwrap_or_else(|error| panic!("token request to {} failed: {error}", self.issuer));
        let json = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text }));
        (status, json)
    }

    /// Asks the token endpoint for an RFC 8693 token exchange (the script's grant): `subject_token` (an access
    /// token this provider issued) traded by `client_id` for a token for `resource`. Returns the HTTP status and the
    /// JSON body (a token response or an OAuth error).
    pub fn token_exchange(&self, client_id: &str, secret: &str, subject_token: &str, resource: &str) -> (u16, Value) {
        let body = form_encode(&[
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject_token),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("resource", resource),
        ]);
        let basic = base64_encode(format!("{}:{}", form_encode_value(client_id), form_encode_value(secret)).as_bytes());
        let (status, text) = self
            .request("POST", "/token", &[("Authorization", &format!("Basic {basic}"))], Some(&body))
            .unwrap_or_else(|error| panic!("token exchange request to {} failed: {error}", self.issuer));
        let json = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "raw": text }));
        (status, json)
    }

    /// Revokes `token` at the provider's RFC 7009 endpoint as the client it was issued to; returns the HTTP status
    /// (200 whether or not the provider knew the token, as the RFC says).
    pub fn revoke(&self, client_id: &str, secret: &str, token: &str) -> u16 {
        let body = form_encode(&[("token", token), ("token_type_hint", "access_token")]);
        let basic = base64_encode(format!("{}:{}", form_encode_value(client_id), form_encode_value(secret)).as_bytes());
        let (status, _) = self
            .request("POST", "/token/revocation", &[("Authorization", &format!("Basic {basic}"))], Some(&body))
            .unwrap_or_else(|error| panic!("revocation request to {} failed: {error}", self.issuer));
        status
    }

    /// A client-credentials access token for `resource`, panicking with the provider's answer when refused.
    pub fn service_token(&self, client_id: &str, secret: &str, scope: &str, resource: &str) -> String {
        let (status, body) = self.client_credentials(client_id, secret, scope, Some(resource));
        match body["access_token"].as_str() {
            Some(token) if status == 200 => token.to_string(),
            _ => panic!("the provider refused a client-credentials token ({status}): {body}"),
        }
    }

    /// The introspection requests the provider received so far and the most that were in flight at once
    /// (`ProviderConfig::set("introspection_delay_ms", …)` holds each one, so they can overlap).
    pub fn introspections(&self) -> (u64, u64) {
        let (status, body) = self.get("/test/introspections").expect("the provider answers");
        assert_eq!(status, 200, "{body}");
        let counts: Value = serde_json::from_str(&body).expect("JSON counts");
        (counts["count"].as_u64().unwrap_or_default(), counts["max_in_flight"].as_u64().unwrap_or_default())
    }

    /// A GET on the provider, returning status and body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        self.request("GET", path, &[], None)
    }

    /// One HTTP/1.1 request to the provider (form body when `body` is given).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(START_GUARD))?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n", self.port);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        if let Some(body) = body {
            stream.write_all(body.as_bytes())?;
        }
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        Ok((status, body))
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A fresh private JWKS, one key per algorithm (`RS256`, `ES256`, `PS256`, `EdDSA`, ...), each with a random `kid`.
pub fn generate_keys(algs: &[&str]) -> Value {
    let run = run_guarded(node_command_with(&["keys"], algs), "oidc_provider.mjs keys");
    assert_eq!(run.code, Some(0), "generating keys failed: {}", run.stderr);
    serde_json::from_str(run.stdout.trim()).expect("the key generator prints a JWKS")
}

/// The public half of a private JWKS (what a JWKS endpoint would publish).
pub fn public_keys(private: &Value) -> Value {
    const PRIVATE_MEMBERS: &[&str] = &["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
    let mut public = private.clone();
    if let Some(keys) = public["keys"].as_array_mut() {
        for key in keys {
            if let Some(members) = key.as_object_mut() {
                members.retain(|name, _| !PRIVATE_MEMBERS.contains(&name.as_str()));
            }
        }
    }
    public
}

/// How [`sign_jwt`] signs.
#[derive(Debug, Clone)]
pub enum Signer<'a> {
    /// With this private JWK (one of a JWKS's `keys`), using the header's `alg`.
    Key(&'a Value),
    /// With HMAC (`HS256`/`HS384`/`HS512` in the header) under this secret.
    Secret(&'a str),
    /// Unsigned (`alg: none` in the header): an empty signature.
    Unsigned,
}

/// A compact JWT with exactly `header` and `payload`, signed as `signer` says.
pub fn sign_jwt(header: &Value, payload: &Value, signer: Signer<'_>) -> String {
    let mut request = json!({ "header": header, "payload": payload });
    match signer {
        Signer::Key(jwk) => request["jwk"] = jwk.clone(),
        Signer::Secret(secret) => request["secret"] = json!(secret),
        Signer::Unsigned => {}
    }
    let mut child = node_command()
        .arg("sign")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("oidc_provider.mjs sign does not start: {error}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(request.to_string().as_bytes()).expect("the signer reads its request");
    }
    let run = crate::wait_guarded(child, "oidc_provider.mjs sign");
    assert_eq!(run.code, Some(0), "signing failed: {}", run.stderr);
    run.stdout.trim().to_string()
}

/// The script, run by the peers' Node 22 with `OIDC_NODE_MODULES` set; panics when Node or the package is missing.
fn node_command() -> Command {
    let peers = Peers::locate();
    let node_modules = peers.dir().join("node").join("node_modules");
    let package = node_modules.join("oidc-provider").join("package.json");
    assert!(
        package.exists(),
        "npm oidc-provider is not installed in the peers ({} missing): run `cargo xtask test --install-only`",
        package.display()
    );
    let mut command = Command::new(peers.node());
    command.arg(script()).env("OIDC_NODE_MODULES", &node_modules);
    command
}

fn node_command_with(first: &[&str], rest: &[&str]) -> Command {
    let mut command = node_command();
    command.args(first).args(rest);
    command
}

fn script() -> PathBuf {
    fixtures_dir().join("oidc_provider.mjs")
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode_value(k), form_encode_value(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `application/x-www-form-urlencoded` for one value (also what RFC 6749 §2.3.1 asks of Basic credentials).
fn form_encode_value(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The decoded header and payload of a compact JWT (no signature check: for a test's assertions only).
pub fn jwt_parts(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let mut decode = |what: &str| -> Value {
        let part = parts.next().unwrap_or_else(|| panic!("{token:?} has no {what}"));
        let bytes = base64url_decode(part).unwrap_or_else(|| panic!("the JWT's {what} is not base64url"));
        serde_json::from_slice(&bytes).unwrap_or_else(|error| panic!("the JWT's {what} is not JSON: {error}"))
    };
    let header = decode("header");
    let payload = decode("payload");
    (header, payload)
}

fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.trim_end_matches('=').bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}
