//! `application/x-www-form-urlencoded` decoding, for form bodies and query strings.

/// The `name=value` pairs of `input`, percent-decoded (`+` is a space); undecodable pairs are dropped.
pub(crate) fn parse(input: &str) -> Vec<(String, String)> {
    input
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((decode(name)?, decode(value)?))
        })
        .collect()
}

/// The first value named `name`.
pub(crate) fn field<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(index + 1..index + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                index += 2;
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_pairs() {
        let pairs = parse("csrf=a%2Bb&tool=read+file&empty=&bad=%zz&flag");
        assert_eq!(field(&pairs, "csrf"), Some("a+b"));
        assert_eq!(field(&pairs, "tool"), Some("read file"));
        assert_eq!(field(&pairs, "empty"), Some(""));
        assert_eq!(field(&pairs, "bad"), None);
        assert_eq!(field(&pairs, "flag"), Some(""));
    }
}
