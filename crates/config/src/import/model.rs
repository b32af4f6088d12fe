//! The client configuration files toolgate imports, as lenient serde types.
//!
//! Claude Desktop (`{"mcpServers": {...}}`), VS Code (`{"servers": {...}, "inputs": [...]}`) and VS Code user
//! settings (`{"mcp": {"servers": {...}}}`) share one server shape. Unknown keys are kept so the import can say
//! what it ignored; server order is kept so the generated file reads like the source.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A client configuration file (any of the three shapes).
#[derive(Debug, Deserialize)]
pub(crate) struct ClientFile {
    #[serde(rename = "mcpServers")]
    pub(crate) mcp_servers: Option<OrderedMap<ServerEntry>>,
    pub(crate) servers: Option<OrderedMap<ServerEntry>>,
    pub(crate) inputs: Option<Vec<InputEntry>>,
    pub(crate) mcp: Option<NestedMcp>,
}

/// VS Code settings: `"mcp": {"servers": ..., "inputs": ...}`.
#[derive(Debug, Deserialize)]
pub(crate) struct NestedMcp {
    pub(crate) servers: Option<OrderedMap<ServerEntry>>,
    pub(crate) inputs: Option<Vec<InputEntry>>,
}

/// One server entry in either client's format.
#[derive(Debug, Deserialize)]
pub(crate) struct ServerEntry {
    #[serde(rename = "type")]
    pub(crate) transport: Option<String>,
    pub(crate) command: Option<String>,
    pub(crate) args: Option<Vec<String>>,
    pub(crate) env: Option<OrderedMap<Option<String>>>,
    pub(crate) cwd: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) headers: Option<OrderedMap<String>>,
    pub(crate) disabled: Option<bool>,
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}

/// A VS Code `inputs` entry (only what a warning needs).
#[derive(Debug, Deserialize)]
pub(crate) struct InputEntry {
    pub(crate) id: Option<String>,
    pub(crate) description: Option<String>,
}

/// A JSON object as `(key, value)` pairs in file order.
#[derive(Debug)]
pub(crate) struct OrderedMap<T>(pub(crate) Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OrderedMap<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for OrderedVisitor<T> {
            type Value = OrderedMap<T>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedMap<T>, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, T>()? {
                    entries.push(entry);
                }
                Ok(OrderedMap(entries))
            }
        }

        deserializer.deserialize_map(OrderedVisitor(PhantomData))
    }
}
