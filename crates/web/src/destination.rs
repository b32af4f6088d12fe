//! Where a login leads: the console page a person asked for before they had a session (an approval's link, most
//! often), carried through the password form (a hidden `next` field) and through single sign-on (inside the sealed
//! login state, never in a parameter the provider echoes), and gone to once they are logged in.
//!
//! Only a same-origin console path is ever a destination: `/console` or a path under `/console/`, with an optional
//! query, of plain characters. An absolute URL, a scheme-relative `//host`, a backslash (which browsers read as a
//! slash), a dot segment, a percent escape of a slash, backslash, dot, percent or control character, and the login
//! pages themselves are refused, and the front page is used instead. This module only checks text; it reads no
//! session and sends nothing.

/// Where a login leads when no destination was asked for, or the one asked for is refused.
pub(crate) const FRONT_PAGE: &str = "/console";

/// The form field and query parameter that carry a destination to the login handlers.
pub(crate) const FIELD: &str = "next";

/// `asked` when it is a console path a login may lead to, else `None` (see the module documentation).
pub(crate) fn console_path(asked: &str) -> Option<&str> {
    let (path, query) = match asked.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (asked, None),
    };
    if path != FRONT_PAGE && !path.starts_with("/console/") {
        return None;
    }
    if !asked.bytes().all(plain) || !escapes_are_plain(asked) {
        return None;
    }
    // `//` would make an empty segment (and, at the start of a later redirect, another host); dot segments climb.
    let mut segments = path.split('/').skip(1);
    if segments.any(|segment| segment.is_empty() || segment == "." || segment == "..") && path != "/console/" {
        return None;
    }
    // The login pages would only show the login again.
    if ["/console/login", "/console/logout", "/console/sso/"].iter().any(|page| path.starts_with(page)) {
        return None;
    }
    if query.is_some_and(|query| query.contains('?')) {
        return None;
    }
    Some(asked)
}

/// `asked`, if a login may lead there, else the front page.
pub(crate) fn or_front_page(asked: Option<&str>) -> &str {
    asked.and_then(console_path).unwrap_or(FRONT_PAGE)
}

/// Characters a destination may hold as they are: unreserved ones, the path and query separators, and `%` for
/// escapes (checked apart). No backslash, colon, `@`, `#`, quote, angle bracket, space or control character.
fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~/?=&%+".contains(&byte)
}

/// Every `%` starts two hex digits whose byte is not a slash, backslash, dot, percent or control character: a
/// browser decodes `%2e` in a path as a dot segment, and the others are the tricks the plain check already refuses.
fn escapes_are_plain(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let Some(byte) = text.get(at + 1..at + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok()) else {
                return false;
            };
            if !(0x20..0x7f).contains(&byte) || b"/\\.%".contains(&byte) {
                return false;
            }
            at += 3;
        } else {
            at += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_paths_are_kept_and_everything_else_refused() {
        for kept in [
            "/console",
            "/console/",
            "/console/approvals/0190a1b2-c3d4",
            "/console/audit?tool=delete_file&verdict=deny",
            "/console/upstreams/a%20b",
        ] {
            assert_eq!(console_path(kept), Some(kept), "{kept}");
        }
        for refused in [
            "https://evil.test/console/x",
            "//evil.test/console",
            "/\\evil.test",
            "/console/..//evil.test",
            "/console/\\evil.test",
            "/console/%2e%2e/%2e%2e/x",
            "/console/%2F%2Fevil.test",
            "/console/%5cevil.test",
            "/console/approvals/%0d%0aSet-Cookie:x",
            "/console/%zz",
            "/console/%2",
            "/consolex",
            "/other",
            "",
            "console/approvals/1",
            "/console//evil.test",
            "/console/./x",
            "/console/login?token=x",
            "/console/sso/login",
            "/console/logout",
            "/console/a\"onmouseover=x",
            "/console/a#x",
            "/console/a b",
            "/console/a?b?c",
        ] {
            assert_eq!(console_path(refused), None, "{refused}");
        }
        assert_eq!(or_front_page(Some("//evil.test")), FRONT_PAGE);
        assert_eq!(or_front_page(None), FRONT_PAGE);
    }
}
