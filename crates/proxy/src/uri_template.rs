//! Matching a resource URI against an RFC 6570 URI template, to route `resources/read` of templated resources to
//! the upstream that declared the template.
//!
//! Simple expressions (`{id}`) match one or more characters other than `/`; reserved expansion (`{+path}`) and
//! fragment (`{#f}`) match anything. Other operators (`{?q}`, `{/seg}`) match any tail. Routing only needs to know
//! *whether* a URI fits, not the variable values.

/// A parsed template: literal text and expressions in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Segment,
    Anything,
}

impl UriTemplate {
    /// Parses a template; an unclosed `{` is taken literally.
    pub fn parse(template: &str) -> UriTemplate {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|close| open + close) else { break };
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let expression = &rest[open + 1..close];
            parts.push(match expression.chars().next() {
                Some('+' | '#' | '?' | '&' | '/' | ';' | '.') => Part::Anything,
                _ => Part::Segment,
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        UriTemplate { parts }
    }

    /// True when `uri` is an expansion of the template.
    pub fn matches(&self, uri: &str) -> bool {
        match_parts(&self.parts, uri)
    }
}

fn match_parts(parts: &[Part], uri: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else { return uri.is_empty() };
    match first {
        Part::Literal(literal) => uri.strip_prefix(literal.as_str()).is_some_and(|tail| match_parts(rest, tail)),
        Part::Segment | Part::Anything => {
            let allow_slash = *first == Part::Anything;
            // Try every non-empty split point (templates are short, so backtracking stays cheap).
            for (index, character) in uri.char_indices() {
                if !allow_slash && character == '/' {
                    return false;
                }
                let end = index + character.len_utf8();
                if match_parts(rest, &uri[end..]) {
                    return true;
                }
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_simple_and_reserved_expressions() {
        let template = UriTemplate::parse("test://template/{id}/data");
        assert!(template.matches("test://template/42/data"));
        assert!(!template.matches("test://template/42/other"));
        assert!(!template.matches("test://template//data"));
        assert!(!template.matches("test://template/a/b/data"));
        let reserved = UriTemplate::parse("file:///{+path}");
        assert!(reserved.matches("file:///a/b/c.txt"));
        assert!(UriTemplate::parse("plain://x").matches("plain://x"));
    }
}
