//! Output formats: the inspect table, lint text, JSON and SARIF. Each takes a finished [`crate::report::Report`]
//! and returns the text to print; none connects, decides or prints by itself.

pub(crate) mod findings;
pub(crate) mod json;
pub(crate) mod sarif;
pub(crate) mod table;

use comfy_table::Color;
use toolgate_core::facts::Category;
use toolgate_core::lint::Severity;

/// The colour of a category in tables.
pub(crate) fn category_color(category: Category) -> Color {
    match category {
        Category::Read => Color::Green,
        Category::Write => Color::Cyan,
        Category::External => Color::Yellow,
        Category::Destructive => Color::Red,
    }
}

/// The colour of a severity.
pub(crate) fn severity_color(severity: Severity) -> Color {
    match severity {
        Severity::Error => Color::Red,
        Severity::Warning => Color::Yellow,
        Severity::Note => Color::Blue,
    }
}

/// Wraps text in ANSI colour codes when colour is on.
pub(crate) fn paint(text: &str, color: Color, enabled: bool) -> String {
    if !enabled {
        return text.to_owned();
    }
    let code = match color {
        Color::Red => 31,
        Color::Green => 32,
        Color::Yellow => 33,
        Color::Blue => 34,
        Color::Cyan => 36,
        _ => 39,
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
