//! Arguments for a call, generated from a tool's input schema: deterministic, minimal (required fields only) and
//! pointed at the scratch tree.
//!
//! A value comes from the schema's own words first (`const`, `default`, `examples`, `enum`), then from its type and
//! `format`; a field whose name says it is a path gets a path inside the scratch copy, so a tool that touches files
//! touches the copy. Nothing here reads or writes files, and the same schema and scratch path always give the same
//! arguments (a repeated call must be identical). Recursion and sizes are bounded, so a hostile schema costs little.

use std::path::Path;

use serde_json::{Map, Value, json};

/// The file every generated file path names (`seed_scratch` writes it before any call), so reads find something.
pub const SAMPLE_FILE: &str = "toolgate-verify-sample.txt";
/// What the sample file holds.
pub const SAMPLE_TEXT: &str = "toolgate verify sample\nsecond line\n";

const MAX_DEPTH: usize = 6;
const MAX_ITEMS: u64 = 3;
const MAX_STRING: u64 = 64;

/// The arguments for one call of the tool `tool` with this `inputSchema`, with paths under `scratch`. The tool's
/// name decides what a bare `path` field means: a directory for `list_directory`, a fresh one for
/// `create_directory`, else the sample file.
pub fn arguments_for(tool: &str, schema: &Value, scratch: &Path) -> Value {
    let context = Context { scratch, directories: directory_tool(tool) };
    match value_for("", schema, &context, 0) {
        Some(Value::Object(map)) => Value::Object(map),
        _ => Value::Object(Map::new()),
    }
}

fn value_for(name: &str, schema: &Value, scratch: &Context<'_>, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let Value::Object(schema) = schema else {
        // `true` or a missing schema accepts anything: a string is the likeliest to be useful.
        return Some(string_for(name, &Map::new(), scratch));
    };
    if let Some(value) = schema.get("const") {
        return Some(value.clone());
    }
    if let Some(value) = schema.get("default") {
        return Some(value.clone());
    }
    if let Some(Value::Array(examples)) = schema.get("examples")
        && let Some(first) = examples.first()
    {
        return Some(first.clone());
    }
    if let Some(example) = schema.get("example") {
        return Some(example.clone());
    }
    if let Some(Value::Array(choices)) = schema.get("enum")
        && let Some(first) = choices.first()
    {
        return Some(first.clone());
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(combinator) {
            // The first branch that is not `null`: an optional value is better given than left out.
            let branch = branches.iter().find(|branch| branch.get("type") != Some(&json!("null")))?;
            return value_for(name, branch, scratch, depth + 1);
        }
    }
    match type_of(schema).as_deref() {
        Some("object") => Some(object_for(schema, scratch, depth)),
        Some("array") => {
            let items = schema.get("items").cloned().unwrap_or(Value::Bool(true));
            let count = schema.get("minItems").and_then(Value::as_u64).unwrap_or(1).clamp(1, MAX_ITEMS);
            let values: Vec<Value> = (0..count).filter_map(|_| value_for(name, &items, scratch, depth + 1)).collect();
            Some(Value::Array(values))
        }
        Some("integer") => Some(json!(number_for(schema).round() as i64)),
        Some("number") => Some(json!(number_for(schema))),
        Some("boolean") => Some(Value::Bool(false)),
        Some("null") => Some(Value::Null),
        _ if schema.contains_key("properties") => Some(object_for(schema, scratch, depth)),
        _ => Some(string_for(name, schema, scratch)),
    }
}

fn type_of(schema: &Map<String, Value>) -> Option<String> {
    match schema.get("type")? {
        Value::String(kind) => Some(kind.clone()),
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).find(|kind| *kind != "null").map(str::to_owned),
        _ => None,
    }
}

fn object_for(schema: &Map<String, Value>, scratch: &Context<'_>, depth: usize) -> Value {
    let mut object = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for field in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties.and_then(|properties| properties.get(field)).unwrap_or(&Value::Bool(true));
        if let Some(value) = value_for(field, property, scratch, depth + 1) {
            object.insert(field.to_owned(), value);
        }
    }
    Value::Object(object)
}

fn number_for(schema: &Map<String, Value>) -> f64 {
    let minimum = schema.get("minimum").or_else(|| schema.get("exclusiveMinimum")).and_then(Value::as_f64);
    let maximum = schema.get("maximum").or_else(|| schema.get("exclusiveMaximum")).and_then(Value::as_f64);
    let mut value =
        minimum.map_or(1.0, |minimum| if schema.contains_key("exclusiveMinimum") { minimum + 1.0 } else { minimum });
    if let Some(maximum) = maximum
        && value > maximum
    {
        value = maximum;
    }
    if value.is_finite() { value } else { 1.0 }
}

/// Where generated values point, and what the tool's name says a bare path is.
struct Context<'a> {
    scratch: &'a Path,
    directories: Option<PathKind>,
}

/// What a bare `path` means for a tool named like this: `Some(Fresh)` for one that makes a directory, `Some(Directory)`
/// for one that reads directories, `None` (a file) otherwise.
fn directory_tool(tool: &str) -> Option<PathKind> {
    let name = tool.to_ascii_lowercase();
    let words: Vec<&str> = name.split(|c: char| !c.is_ascii_alphanumeric()).filter(|word| !word.is_empty()).collect();
    let has = |candidates: &[&str]| words.iter().any(|word| candidates.contains(word));
    let about_directories = has(&["directory", "directories", "dir", "dirs", "folder", "folders", "tree"]);
    if about_directories && has(&["create", "make", "mkdir", "new", "add"]) {
        Some(PathKind::Fresh)
    } else if about_directories || has(&["search", "find", "list", "glob"]) {
        Some(PathKind::Directory)
    } else {
        None
    }
}

/// What a field's name says it holds, when it names a place in the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathKind {
    /// A directory: the scratch root.
    Directory,
    /// A file that exists: the sample file.
    Existing,
    /// A file to create: a fresh name per field.
    Fresh,
}

fn path_kind(name: &str) -> Option<PathKind> {
    let words = words_of(name);
    // The last word says what the value is: `repo_path` is a path, `source_timezone` is a time zone.
    let last = words.last()?.as_str();
    let has = |candidates: &[&str]| words.iter().any(|word| candidates.contains(&word.as_str()));
    let directory = ["dir", "directory", "folder", "repo", "repository", "root", "cwd", "workspace"];
    if directory.contains(&last) || (last == "path" && has(&directory)) {
        Some(PathKind::Directory)
    } else if ["destination", "dest", "output"].contains(&last)
        || (["path", "file", "filename", "filepath"].contains(&last)
            && has(&["new", "destination", "dest", "target", "output", "to"]))
    {
        Some(PathKind::Fresh)
    } else if ["path", "paths", "file", "files", "filename", "filepath", "source", "src"].contains(&last) {
        Some(PathKind::Existing)
    } else {
        None
    }
}

/// The lowercase words of a field name: `repo_path`, `filePath` and `file-path` all give `file`/`repo`, `path`.
fn words_of(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A value for a string field from its description's own example (`e.g. 'Europe/London'`) or, failing that, from
/// the usual meaning of its name (`timezone`, `time`, `language`).
fn conventional(name: &str, schema: &Map<String, Value>) -> Option<String> {
    if let Some(description) = schema.get("description").and_then(Value::as_str) {
        let lower = description.to_ascii_lowercase();
        if let Some(at) = ["e.g.", "for example", "example:", "such as"].iter().find_map(|marker| lower.find(marker)) {
            let rest = &description[at..];
            for quote in ['\'', '"', '`'] {
                if let Some((_, tail)) = rest.split_once(quote)
                    && let Some((example, _)) = tail.split_once(quote)
                    && !example.is_empty()
                    && example.len() <= MAX_STRING as usize
                {
                    return Some(example.to_owned());
                }
            }
        }
    }
    let words = words_of(name);
    let last = words.last().map(String::as_str)?;
    match last {
        "timezone" | "tz" | "zone" => Some("UTC".into()),
        "time" => Some("12:00".into()),
        "date" => Some("2026-01-01".into()),
        "language" | "lang" | "locale" => Some("en".into()),
        "url" | "uri" | "link" | "endpoint" => Some("https://example.com/".into()),
        "email" => Some("verify@example.com".into()),
        _ => None,
    }
}

fn string_for(name: &str, schema: &Map<String, Value>, context: &Context<'_>) -> Value {
    let scratch = context.scratch;
    if let Some(kind) = path_kind(name) {
        let kind = match (kind, context.directories) {
            (PathKind::Existing, Some(kind)) => kind,
            (kind, _) => kind,
        };
        let path = match kind {
            PathKind::Directory => scratch.to_path_buf(),
            PathKind::Existing => scratch.join(SAMPLE_FILE),
            PathKind::Fresh => scratch.join(format!("toolgate-verify-{}.txt", sanitized(name))),
        };
        return Value::String(path.to_string_lossy().into_owned());
    }
    let text = match schema.get("format").and_then(Value::as_str) {
        Some("uri" | "url" | "iri" | "uri-reference") => "https://example.com/".to_owned(),
        Some("date-time") => "2026-01-01T00:00:00Z".to_owned(),
        Some("date") => "2026-01-01".to_owned(),
        Some("time") => "00:00:00Z".to_owned(),
        Some("email" | "idn-email") => "verify@example.com".to_owned(),
        Some("uuid") => "00000000-0000-4000-8000-000000000000".to_owned(),
        Some("hostname" | "idn-hostname") => "example.com".to_owned(),
        Some("ipv4") => "192.0.2.1".to_owned(),
        Some("ipv6") => "2001:db8::1".to_owned(),
        _ => conventional(name, schema).unwrap_or_else(|| "toolgate".to_owned()),
    };
    let minimum = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0).min(MAX_STRING);
    let mut text = text;
    while (text.chars().count() as u64) < minimum {
        text.push('x');
    }
    Value::String(text)
}

fn sanitized(name: &str) -> String {
    let cleaned: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    if cleaned.is_empty() { "value".to_owned() } else { cleaned }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(schema: Value, expected: Value) {
        assert_eq!(arguments_for("tool", &schema, Path::new("/scratch")), expected, "{schema}");
    }

    #[test]
    fn required_fields_take_the_schema_s_own_words_first() {
        check(
            json!({"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["fast", "safe"]},
                "count": {"type": "integer", "default": 7},
                "city": {"type": "string", "examples": ["Paris"]},
                "when": {"type": "string", "format": "date-time"},
                "flag": {"type": "boolean"},
                "optional": {"type": "string"}
            }, "required": ["mode", "count", "city", "when", "flag"]}),
            json!({"mode": "fast", "count": 7, "city": "Paris", "when": "2026-01-01T00:00:00Z", "flag": false}),
        );
    }

    #[test]
    fn paths_point_inside_the_scratch_tree() {
        check(
            json!({"type": "object", "properties": {
                "path": {"type": "string"}, "repo_path": {"type": "string"}, "destination": {"type": "string"},
                "files": {"type": "array", "items": {"type": "string"}}
            }, "required": ["path", "repo_path", "destination", "files"]}),
            json!({
                "path": "/scratch/toolgate-verify-sample.txt",
                "repo_path": "/scratch",
                "destination": "/scratch/toolgate-verify-destination.txt",
                "files": ["/scratch/toolgate-verify-sample.txt"]
            }),
        );
    }

    #[test]
    fn the_tool_s_name_says_what_a_bare_path_is() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
        let path = |tool: &str| arguments_for(tool, &schema, Path::new("/scratch"))["path"].clone();
        assert_eq!(path("read_file"), json!("/scratch/toolgate-verify-sample.txt"));
        assert_eq!(path("list_directory"), json!("/scratch"));
        assert_eq!(path("search_files"), json!("/scratch"));
        assert_eq!(path("create_directory"), json!("/scratch/toolgate-verify-path.txt"));
    }

    #[test]
    fn names_and_descriptions_say_what_a_string_is() {
        check(
            json!({"type": "object", "properties": {
                "source_timezone": {"type": "string"},
                "time": {"type": "string"},
                "city": {"type": "string", "description": "A city, e.g. 'Lisbon' or 'Porto'"},
                "filePath": {"type": "string"},
                "new_path": {"type": "string"}
            }, "required": ["source_timezone", "time", "city", "filePath", "new_path"]}),
            json!({
                "source_timezone": "UTC",
                "time": "12:00",
                "city": "Lisbon",
                "filePath": "/scratch/toolgate-verify-sample.txt",
                "new_path": "/scratch/toolgate-verify-new-path.txt"
            }),
        );
    }

    #[test]
    fn hostile_schemas_give_something_bounded() {
        check(json!("not a schema"), json!({}));
        check(
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "array", "minItems": 1000000}}}),
            json!({"a": ["toolgate", "toolgate", "toolgate"]}),
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..50 {
            deep = json!({"type": "object", "required": ["x"], "properties": {"x": deep}});
        }
        let generated = arguments_for("tool", &deep, Path::new("/scratch"));
        assert!(generated.is_object());
        let huge: Value = serde_json::from_str(
            r#"{"type": "object", "required": ["n"], "properties": {"n": {"type": "number", "minimum": 1e400}}}"#,
        )
        .unwrap_or_default();
        assert!(arguments_for("tool", &huge, Path::new("/scratch"))["n"].is_number());
    }
}
