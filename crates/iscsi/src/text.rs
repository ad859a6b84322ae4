//! Text key=value data (RFC 7143 §6.1): pairs `key=value`, each ended by a NUL byte, in the data
//! segment of Login and Text PDUs. Parsing is bounded by `limits::TEXT_LEN_MAX` over a whole
//! exchange (the C bit splits one exchange across PDUs; [`TextBuffer`] joins them).

use tessera_types::limits::TEXT_LEN_MAX;

use crate::error::TextError;

/// Longest key name (RFC 7143 §6.1: 63 bytes).
pub const KEY_LEN_MAX: usize = 63;
/// Longest value we accept. RFC 7143 §6.1 limits most values to 255 bytes; SendTargets answers
/// and names may be longer, so allow the 8192 that §6.1 gives as the overall bound.
pub const VALUE_LEN_MAX: usize = 8192;

/// One parsed pair.
pub type KeyValue = (String, String);

/// Parses NUL-terminated pairs. Empty strings between NULs (padding) are skipped.
pub fn parse_text(data: &[u8]) -> Result<Vec<KeyValue>, TextError> {
    if data.len() > TEXT_LEN_MAX {
        return Err(TextError::TooLong { len: data.len(), max: TEXT_LEN_MAX });
    }
    let mut out = Vec::new();
    for item in data.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let s = std::str::from_utf8(item).map_err(|_| TextError::NotUtf8)?;
        let (k, v) = s.split_once('=').ok_or_else(|| TextError::NoEquals(truncate(s)))?;
        if k.is_empty() || k.len() > KEY_LEN_MAX || !k.bytes().all(is_key_char) {
            return Err(TextError::BadKey(truncate(k)));
        }
        if v.len() > VALUE_LEN_MAX {
            return Err(TextError::ValueTooLong(k.to_string()));
        }
        out.push((k.to_string(), v.to_string()));
    }
    Ok(out)
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Key-name characters (RFC 7143 §6.1: letters, digits, '.', '-', '+', '@', '_').
fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'@' | b'_')
}

/// Appends `key=value\0` for each pair.
pub fn encode_text<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)], out: &mut Vec<u8>) {
    for (k, v) in pairs {
        out.extend_from_slice(k.as_ref().as_bytes());
        out.push(b'=');
        out.extend_from_slice(v.as_ref().as_bytes());
        out.push(0);
    }
}

/// Joins the data segments of one text exchange (PDUs with the C bit), refusing to grow past
/// `TEXT_LEN_MAX`.
#[derive(Debug, Default)]
pub struct TextBuffer {
    bytes: Vec<u8>,
}

impl TextBuffer {
    pub fn push(&mut self, data: &[u8]) -> Result<(), TextError> {
        let len = self.bytes.len() + data.len();
        if len > TEXT_LEN_MAX {
            return Err(TextError::TooLong { len, max: TEXT_LEN_MAX });
        }
        self.bytes.extend_from_slice(data);
        Ok(())
    }

    /// Parses and clears the buffer.
    pub fn take(&mut self) -> Result<Vec<KeyValue>, TextError> {
        let r = parse_text(&self.bytes);
        self.bytes.clear();
        r
    }
}

/// Looks a key up in parsed pairs.
pub fn find<'a>(pairs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn byte_exact_encoding() {
        let mut out = Vec::new();
        encode_text(&[("HeaderDigest", "None"), ("MaxBurstLength", "262144")], &mut out);
        assert_eq!(out, b"HeaderDigest=None\0MaxBurstLength=262144\0");
        let back = parse_text(&out).unwrap();
        assert_eq!(back[1], ("MaxBurstLength".to_string(), "262144".to_string()));
    }

    #[test]
    fn padding_and_empty_values() {
        let pairs = parse_text(b"TargetAlias=\0\0\0").unwrap();
        assert_eq!(pairs, vec![("TargetAlias".to_string(), String::new())]);
        assert!(parse_text(b"NoEquals\0").is_err());
        assert!(parse_text(b"bad key=1\0").is_err());
        assert!(parse_text(&[0xFF, b'=', b'1', 0]).is_err());
    }

    #[test]
    fn buffer_is_bounded() {
        let mut b = TextBuffer::default();
        b.push(&vec![b'a'; TEXT_LEN_MAX]).unwrap();
        assert!(b.push(b"x").is_err());
    }

    proptest! {
        #[test]
        fn round_trip(pairs in proptest::collection::vec(("[A-Za-z][A-Za-z0-9.+@_-]{0,20}", "[ -~&&[^=]]{0,40}"), 0..10)) {
            let mut out = Vec::new();
            encode_text(&pairs, &mut out);
            let back = parse_text(&out).unwrap();
            let expect: Vec<KeyValue> = pairs.into_iter().collect();
            prop_assert_eq!(back, expect);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_text(&bytes);
        }
    }
}
