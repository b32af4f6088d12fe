//! JSON with comments and trailing commas (VS Code's `mcp.json` dialect) turned into plain JSON.
//!
//! Comments and trailing commas become spaces byte for byte, so every line and column `serde_json` reports still
//! points at the original text. String contents are never touched.

/// `text` with `//` and `/* */` comments and trailing commas blanked out.
pub(crate) fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    blank_comments(&mut bytes);
    blank_trailing_commas(&mut bytes);
    // Only ASCII bytes were replaced, and only whole comments (so whole characters): still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

fn blank(byte: &mut u8) {
    if *byte != b'\n' {
        *byte = b' ';
    }
}

fn blank_comments(bytes: &mut [u8]) {
    let mut index = 0;
    let mut in_string = false;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_string {
            match byte {
                b'\\' => index += 1,
                b'"' => in_string = false,
                _ => {}
            }
            index += 1;
            continue;
        }
        match (byte, bytes.get(index + 1)) {
            (b'"', _) => in_string = true,
            (b'/', Some(b'/')) => {
                while index < bytes.len() && bytes[index] != b'\n' {
                    blank(&mut bytes[index]);
                    index += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let end = bytes[index + 2..]
                    .windows(2)
                    .position(|pair| pair == b"*/")
                    .map_or(bytes.len(), |position| index + 2 + position + 2);
                for byte in &mut bytes[index..end] {
                    blank(byte);
                }
                index = end;
                continue;
            }
            _ => {}
        }
        index += 1;
    }
}

fn blank_trailing_commas(bytes: &mut [u8]) {
    let mut in_string = false;
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if in_string {
            match byte {
                b'\\' => index += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if byte == b'"' {
            in_string = true;
        } else if byte == b',' {
            let next = bytes[index + 1..].iter().find(|next| !next.is_ascii_whitespace());
            if matches!(next, Some(b'}' | b']')) {
                bytes[index] = b' ';
            }
        }
        index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::strip_jsonc;

    #[test]
    fn comments_and_trailing_commas_become_spaces() {
        let check = |input: &str, expected: &str| assert_eq!(strip_jsonc(input), expected);
        check("{\"a\": 1, // note\n}", "{\"a\": 1         \n}");
        check("[1, /* é */ 2,]", "[1,          2 ]");
        check("{\"u\": \"http://x/*y*/\", }", "{\"u\": \"http://x/*y*/\"  }");
        check("{\"s\": \"a\\\"//b\"}", "{\"s\": \"a\\\"//b\"}");
    }
}
