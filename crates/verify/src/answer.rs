//! Whether a call's answer is an error in all but its flag: a `tools/call` result without `isError: true` whose
//! content says the call failed. Pure: no IO.
//!
//! Many servers answer a failure as an ordinary result: coolify's `Error: confirm=true required`, zammad's and
//! office-powerpoint's `{"error": "Nothing to change: ..."}` (as text and as `structuredContent`). Counted as a
//! success, such a quiet call would be *support* (docs/verify.md), evidence for a relaxing hint from a call that
//! did nothing. The classification is deliberately narrow, because a wrong "error" only withholds support while a
//! wrong "success" lends it, but an answer that merely mentions an error must stay a success:
//!
//! - **An error object.** The structured content (unwrapped from a lone `result` member, as Python's FastMCP
//!   wraps it), else the first text item read as JSON (up to 16 KiB), is an
//!   object with a non-empty `error` string (or an `error` object with a `message`, or `error: true` with a
//!   `message`), or with `success`/`ok` false and a `message`; and every other member only describes the error
//!   (`message`, `code`, `status`, `details`, `hint`, ..., or the alternatives it offers, `available_*`). An
//!   object with data beside its `error` member (a job record with a failed status) is a result.
//! - **An error sentence.** With no structured content and text items only (an image, a resource or a link is a
//!   result, whatever its caption says), the first non-empty line, past leading symbols (`❌`, `**`, `[`), opens
//!   like an error: `Error:` (or `error` then a word that says where or when: `Error executing tool ...`,
//!   `Error 404`), `Exception:`, `Traceback (most recent call last)`, `Fatal:`, `MCP error`, `Failed to`,
//!   `Failed:`, `Unable to`, `Could not`, `Couldn't`, `Cannot`, `Can't`, `Permission denied`, `Access denied`.
//!   A line that only contains such a word (`Found 2 errors in the log`, `Errors: 0`, `Error rates by service`)
//!   is a result.

use serde_json::{Map, Value};

/// Most bytes of a text item read as JSON: an error object is small.
const MAX_JSON_BYTES: usize = 16 * 1024;

/// Members that only describe an error (besides `error`): an object holding anything else is data.
const ERROR_MEMBERS: [&str; 14] = [
    "message",
    "code",
    "status",
    "statuscode",
    "details",
    "detail",
    "hint",
    "suggestion",
    "help",
    "type",
    "errortype",
    "errorcode",
    "success",
    "ok",
];

/// Words after an opening `error` (or `exception`) that say where or when it happened: `Error executing tool`,
/// `Error while reading`, `Error in request`. Any other word makes it a noun phrase (`Error rates by service`).
const ERROR_CONTEXT: [&str; 20] = [
    "executing",
    "calling",
    "while",
    "when",
    "during",
    "occurred",
    "in",
    "on",
    "from",
    "processing",
    "fetching",
    "reading",
    "writing",
    "getting",
    "running",
    "loading",
    "parsing",
    "creating",
    "updating",
    "deleting",
];

/// Openings that say the call did not do its work, compared lowercased.
const FAILURE_OPENINGS: [&str; 11] = [
    "traceback (most recent call last)",
    "mcp error",
    "failed to ",
    "failed:",
    "unable to ",
    "could not ",
    "couldn't ",
    "cannot ",
    "can't ",
    "permission denied",
    "access denied",
];

/// The error a result answered without `isError: true`, as the server worded it (the error member's text or the
/// first line, unbounded: the caller bounds and escapes it); `None` for a normal answer, or one flagged `isError`.
pub(crate) fn quiet_error(result: &Value) -> Option<String> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let structured = result.get("structuredContent").filter(|value| !value.is_null()).map(unwrapped);
    let content = result.get("content").and_then(Value::as_array);
    let first_text = content.and_then(|items| items.first()).and_then(text_of);
    // A wrapped text (`{"result": "Error: ..."}`) is the text itself: judged as text, below.
    let structured = structured.filter(|value| !(value.is_string() && first_text == value.as_str()));
    let object = match structured {
        Some(value) => Some(value.clone()),
        None => first_text
            .filter(|text| text.len() <= MAX_JSON_BYTES && text.trim_start().starts_with('{'))
            .and_then(|text| serde_json::from_str::<Value>(text).ok()),
    };
    if let Some(Value::Object(object)) = &object {
        return error_object(object).map(|text| first_line(&text).to_owned());
    }
    if structured.is_some() || object.is_some() {
        return None;
    }
    let items = content?;
    if items.is_empty() || !items.iter().all(|item| text_of(item).is_some()) {
        return None;
    }
    let line = first_line(first_text?);
    opens_like_an_error(line).then(|| line.to_owned())
}

/// The value a structured content wraps: Python's FastMCP puts a result whose type is not an object under a lone
/// `result` member (`{"result": {"error": "..."}}`, office-powerpoint).
fn unwrapped(structured: &Value) -> &Value {
    match structured.as_object() {
        Some(object) if object.len() == 1 => object.get("result").unwrap_or(structured),
        _ => structured,
    }
}

/// A content item's text, when it is a text item.
fn text_of(item: &Value) -> Option<&str> {
    (item.get("type")?.as_str()? == "text").then(|| item.get("text")?.as_str()).flatten()
}

/// The first line with something on it, trimmed.
fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default()
}

/// The error an object states, when the object is an error and nothing else.
fn error_object(object: &Map<String, Value>) -> Option<String> {
    let describes_an_error = object.keys().all(|key| {
        let key: String = key.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_lowercase();
        key == "error" || ERROR_MEMBERS.contains(&key.as_str()) || key.starts_with("available")
    });
    if !describes_an_error {
        return None;
    }
    let said = |value: Option<&Value>| {
        value.and_then(Value::as_str).map(str::trim).filter(|text| !text.is_empty()).map(str::to_owned)
    };
    let flag = |key: &str| object.get(key).and_then(Value::as_bool);
    if flag("success") == Some(true) || flag("ok") == Some(true) {
        return None;
    }
    match object.get("error") {
        Some(Value::String(_)) => return said(object.get("error")),
        Some(Value::Object(inner)) => return said(inner.get("message")).or_else(|| said(object.get("message"))),
        Some(Value::Bool(true)) => return said(object.get("message")),
        _ => {}
    }
    if flag("success") == Some(false) || flag("ok") == Some(false) {
        return said(object.get("message"));
    }
    None
}

/// True when `line` opens the way a failure's message does (module documentation).
fn opens_like_an_error(line: &str) -> bool {
    let start = line.trim_start_matches(|c: char| !c.is_alphanumeric());
    let lower = start.to_lowercase();
    if FAILURE_OPENINGS.iter().any(|opening| lower.starts_with(opening)) {
        return true;
    }
    ["error", "exception", "fatal"].into_iter().any(|word| {
        let Some(rest) = lower.strip_prefix(word) else { return false };
        match rest.chars().next() {
            None => true,
            Some(':' | '!' | ']' | ')' | '.') => true,
            Some(' ') => {
                let rest = rest.trim_start();
                rest.starts_with('-')
                    || rest.starts_with('—')
                    || rest.starts_with(':')
                    || rest.starts_with(|c: char| c.is_ascii_digit())
                    || (word == "error"
                        && ERROR_CONTEXT.iter().any(|context| {
                            rest.strip_prefix(context)
                                .is_some_and(|after| after.chars().next().is_none_or(|c| !c.is_alphanumeric()))
                        }))
            }
            Some(_) => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}]})
    }

    /// What the corpus servers answered, without `isError`, when a call failed (corpus/observations).
    #[test]
    fn errors_answered_as_results_are_errors() {
        let cases = [
            (text("Error: confirm=true required"), "Error: confirm=true required"),
            (text("Error: Operation failed"), "Error: Operation failed"),
            (text("  ❌ **Error:** no vault\nmore"), "❌ **Error:** no vault"),
            (text("Error executing tool fetch: timed out"), "Error executing tool fetch: timed out"),
            (text("Traceback (most recent call last):\n  File"), "Traceback (most recent call last):"),
            (text("Failed to open the file"), "Failed to open the file"),
            (text("Could not resolve host"), "Could not resolve host"),
            (text("cannot read the index"), "cannot read the index"),
            (text("[ERROR] no URL configured"), "[ERROR] no URL configured"),
            (text("Error 404 Not Found"), "Error 404 Not Found"),
            (text("fatal: not a git repository"), "fatal: not a git repository"),
            (text("{\n  \"error\": \"Nothing to change: pass title.\"\n}"), "Nothing to change: pass title."),
            (
                json!({"content": [{"type": "text", "text": "{\"error\": \"x\"}"}],
                       "structuredContent": {"error": "Presentation not found"}}),
                "Presentation not found",
            ),
            (
                text("{\"error\": \"Template 'a' not found\", \"available_templates\": [\"b\"]}"),
                "Template 'a' not found",
            ),
            (text("{\"success\": false, \"message\": \"No such file\"}"), "No such file"),
            (text("{\"error\": {\"code\": 3, \"message\": \"denied\"}}"), "denied"),
            (text("{\"error\": true, \"message\": \"first line\\nsecond\"}"), "first line"),
            (
                json!({"content": [{"type": "text", "text": "{\"error\": \"none loaded\"}"}],
                       "structuredContent": {"result": {"error": "none loaded"}}}),
                "none loaded",
            ),
            (
                json!({"content": [{"type": "text", "text": "Failed to merge cells."}],
                       "structuredContent": {"result": "Failed to merge cells."}}),
                "Failed to merge cells.",
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(quiet_error(&result).as_deref(), Some(expected), "{result}");
        }
    }

    /// Normal answers of the corpus servers, and answers that only mention an error, stay successes.
    #[test]
    fn answers_that_mention_an_error_are_results() {
        let cases = [
            text("Echo: toolgate"),
            text("No matches found"),
            text("Found 2 errors in the log:\nError: disk full"),
            text("Errors: 0"),
            text("Error rates by service: api 0.1%"),
            text("Errorless run"),
            text("Exceptional weather today"),
            text("The fetch failed to parse? No: it worked."),
            text("Canned answers: 3"),
            text(""),
            text("{\"tool\":\"route\",\"recommended\":[],\"hint\":\"No confident action match.\"}"),
            text("{\"available\": false, \"message\": \"SEARXNG_URL is not configured; cannot fetch\"}"),
            text("{\"query\": \"toolgate\", \"suggestions\": []}"),
            text("{\"id\": 7, \"status\": \"failed\", \"error\": \"timed out\"}"),
            text("{\"success\": true, \"error\": null, \"message\": \"done\"}"),
            text("{\"error\": null}"),
            text("{\"error\": \"\"}"),
            text("{\"errors\": []}"),
            text("[{\"error\": \"x\"}]"),
            text("{not json: Error: x}"),
            json!({"content": [{"type": "text", "text": "Error: shown below"}, {"type": "image", "data": "", "mimeType": "image/png"}]}),
            json!({"content": [{"type": "text", "text": "Error: x"}], "structuredContent": {"temperature": 3}}),
            json!({"content": [{"type": "text", "text": "Error: x"}], "isError": true}),
            json!({"content": [{"type": "text", "text": "Error: x"}], "structuredContent": {"result": "Done"}}),
            json!({"content": [{"type": "text", "text": "{\"error\": \"x\"}"}],
                   "structuredContent": {"result": {"error": "x", "rows": 3}}}),
            json!({"content": []}),
            json!({}),
        ];
        for result in cases {
            assert_eq!(quiet_error(&result), None, "{result}");
        }
    }

    /// A large text is not parsed as JSON (an error object is small), and its first line still decides.
    #[test]
    fn a_long_answer_is_judged_by_its_first_line() {
        let long = format!("{{\"error\": \"{}\"}}", "x".repeat(MAX_JSON_BYTES));
        assert_eq!(quiet_error(&text(&long)), None);
        let log = format!("Error: quota exceeded\n{}", "line\n".repeat(10_000));
        assert_eq!(quiet_error(&text(&log)).as_deref(), Some("Error: quota exceeded"));
    }
}
